@mcp
Feature: Tools know who is calling
  In order that an agent can only act as itself, where it was woken
  As an operator
  I want tools offered by role, caller identity taken from the connection, and no secret handed to agents

  Background:
    Given the homeserver has users "ori" and "mia"
    And agents "agent-a" and "agent-b" are bound to "#ops"

  Scenario: an ordinary session is offered the read and post tools, delegation and the handoff, not completion
    Given agent-a is answering a mention in "#ops"
    Then agent-a sees exactly the tools zooid_get_recent_threads, zooid_get_thread_history, zooid_get_history, zooid_get_members, zooid_get_room_info, zooid_get_rooms, zooid_send_message, zooid_start_task_threads and zooid_handoff
    And agent-a does not see zooid_complete_task

  Scenario: a tool the session is not offered is refused
    When agent-a calls zooid_complete_task with {"summary": "all done"}
    Then the call is refused as an unknown tool

  Scenario: a call naming the room to read is refused
    When agent-a calls zooid_get_history with {"room_id": "#ops"}
    Then the call is refused with "invalid_argument"

  Scenario: a call naming the agent it acts for is refused
    When agent-a calls zooid_send_message with {"room": "#ops", "text": "hi", "agent": "agent-b"}
    Then the call is refused with "invalid_argument"
    And agent-a has posted nothing containing "hi"

  Scenario: the session/new carries the zooid bridge, and no secret reaches the agent
    Given agent-a is answering a mention in "#ops"
    Then agent-a's session/new offers the zooid MCP server over stdio
    And no secret appears in agent-a's environment, arguments or session/new

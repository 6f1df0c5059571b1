@routing
Feature: A spare agent process waits for the next thread
  In order to have the first answer in a new thread come without waiting for an agent to start
  As the operator of a Zooid daemon
  I want an agent with prewarm to keep one process started and initialized before a thread needs
  it, counted against the process caps, first to go when a cap is needed, and stopped when idle

  Background:
    Given the homeserver has users "ori" and "mia"
    And agents "agent-a" and "agent-b" are bound to "#ops"

  Scenario: the next thread runs in the spare, and another spare takes its place
    Given agent-a keeps a spare process
    And agent-a will reply "svc-a is up"
    And agent-a will reply "svc-b is up"
    When agent-a has a spare process
    And ori says in "#ops": "@agent-a how is svc-a?"
    Then the thread of "how is svc-a?" gets "svc-a is up" from agent-a
    And agent-a answered the thread of "how is svc-a?" in the session that spare opened
    When agent-a has a spare process
    And mia says in "#ops": "@agent-a how is svc-b?"
    Then the thread of "how is svc-b?" gets "svc-b is up" from agent-a
    And agent-a answered the thread of "how is svc-b?" in the session that spare opened

  Scenario: a spare counts against the daemon's cap and is the first to go for a thread
    Given agent-a keeps a spare process
    And the daemon runs at most 2 agent processes
    And agent-b will take a turn that:
      | waits until | released |
      | says        | done     |
    And agent-b will take a turn that:
      | waits until | released |
      | says        | done     |
    When agent-a has a spare process
    And ori says in "#ops": "@agent-b audit svc-a"
    And mia says in "#ops": "@agent-b audit svc-b"
    And agent-b has been prompted 2 times
    Then agent-a's spare process has stopped
    When agent-b's turn is released
    Then the thread of "audit svc-a" gets "done" from agent-b
    And the thread of "audit svc-b" gets "done" from agent-b
    And the agents' live processes peaked at 2 together

  Scenario: a spare never pushes out a thread's process: at the agent's cap there is none
    Given agent-a keeps a spare process
    And agent-a runs at most 1 process
    And agent-a will reply "svc-a is up"
    And agent-a will reply "svc-b is up"
    When agent-a has a spare process
    And ori says in "#ops": "@agent-a how is svc-a?"
    Then the thread of "how is svc-a?" gets "svc-a is up" from agent-a
    And agent-a answered the thread of "how is svc-a?" in the session that spare opened
    When mia says in "#ops": "@agent-a how is svc-b?"
    Then the thread of "how is svc-b?" gets "svc-b is up" from agent-a
    And agent-a's process in the thread of "how is svc-a?" has stopped
    And agent-a's live processes peaked at 1

  Scenario: an idle spare is stopped like any idle agent process
    Given agent-a keeps a spare process
    And agent processes stop after 1 second idle
    When agent-a has a spare process
    Then agent-a's spare process has stopped

  Scenario: a daemon that shuts down stops its spare
    Given agent-a keeps a spare process
    When agent-a has a spare process
    And the daemon shuts down
    Then agent-a's spare process has stopped

  Scenario: a task thread takes the spare process but opens a session of its own, with the assignee's tools from the start
    Given agent-b keeps a spare process
    And agent-b will take a turn that:
      | calls | zooid_complete_task with {"summary": "svc-a is clean"} |
      | says  | done                                                   |
    When agent-b has a spare process
    And ori says in "#ops": "@agent-a get svc-a looked at"
    And agent-a calls zooid_start_task_threads with {"tasks": [{"agent": "agent-b", "prompt": "audit svc-a"}]}
    Then agent-b got a result from zooid_complete_task
    And the task "audit svc-a" ends complete with "svc-a is clean"
    And agent-b answered the thread of "audit svc-a" in a session of its own on that spare process

  @real-agents
  Scenario: a real Claude Code answers in its spare session, its Zooid tools serving the thread
    Given agent "bot" is bound to "#ops"
    And bot runs real claude
    And bot keeps a spare process
    And bot's model will call zooid_get_room_info
    And bot's model will say "this room: {result}"
    When bot's spare is ready
    And ori says in "#ops": "@bot what room is this?"
    Then bot's model read the result of zooid_get_room_info: {"id": "#ops", "transport": "matrix"}
    And bot posts a notice containing "transport" in the thread

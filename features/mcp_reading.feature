@mcp
Feature: Reading a busy room from one mention
  In order to answer a message that arrived without context
  As an agent woken in a busy room
  I need to scan the room and drill into the thread that matters

  Who is in the room and where the agent may post is read from the room's state, not its
  history: room_state.feature.

  Background:
    Given the homeserver has users "ori" and "mia"
    And agents "agent-a" and "agent-b" are bound to "#ops"
    And "#ops" has 800 messages in 40 threads from ori, mia, agent-a and agent-b

  Scenario: the overview shows thread roots and top-level messages, newest first, without reply noise
    When ori says in "#ops": "@agent-a can someone audit svc-a"
    And agent-a calls zooid_get_recent_threads with {"limit": 5}
    Then the result has 5 threads
    And the threads are newest first
    And no thread in the result is a thread reply
    And every thread in the result has reply_count and last_activity_at

  Scenario: drilling into a thread gives its root, then its replies in order
    Given agent-a is answering a mention in "#ops"
    When agent-a calls zooid_get_thread_history with {"thread_id": "#ops/thread-38"}
    Then the messages are thread 38 of "#ops", root first

  Scenario: the full history interleaves threads and says which thread each reply is in
    Given agent-a is answering a mention in "#ops"
    When agent-a calls zooid_get_history with {"limit": 100}
    Then the result has 100 messages
    And the messages are oldest first
    And each reply in the result carries its thread_id and no top-level message does

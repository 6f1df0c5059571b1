@mcp
Feature: A reply taken back leaves its thread
  In order to see a thread as its people left it
  As an agent reading a room
  I need a redacted reply left out of the thread's reply count and its history

  Background:
    Given the homeserver has users "ori" and "mia"
    And agent "agent-a" is bound to "#ops"

  Scenario: a redacted reply is neither counted nor read back
    When ori says in "#ops": "audit svc-a"
    And mia replies in the thread: "svc-a looks fine"
    And ori replies in the thread: "posted the wrong log, ignore"
    And ori replies in the thread: "svc-a error rate is 2%"
    And ori redacts "posted the wrong log, ignore"
    And agent-a calls zooid_get_thread_history with {"thread_id": "$thread"}
    Then the result has 3 messages
    And the result includes {"messages": [{"text": "audit svc-a"}, {"text": "svc-a looks fine"}, {"text": "svc-a error rate is 2%"}]}
    When agent-a calls zooid_get_recent_threads with {"limit": 5}
    Then the result includes {"threads": [{"text": "audit svc-a", "reply_count": 2}]}

  Scenario: a thread whose only reply was redacted counts no replies
    When ori says in "#ops": "restart svc-b"
    And mia replies in the thread: "done"
    And mia redacts "done"
    And agent-a calls zooid_get_recent_threads with {"limit": 5}
    Then the result includes {"threads": [{"text": "restart svc-b", "reply_count": 0}]}

@fake-only
Feature: Working with homeservers that do less or push back
  In order to run against whatever homeserver an operator has
  As an agent
  I want reads to fall back where a homeserver lacks a feature, and posts to survive rate limits

  Background:
    Given the homeserver has users "ori" and "mia"
    And agents "agent-a" and "agent-b" are bound to "#ops"

  @mcp
  Scenario: without bundled aggregations or relation filters a thread still comes back whole
    Given "#ops" has 300 messages in 6 threads from ori, mia, agent-a and agent-b
    And the homeserver bundles no aggregations
    And the homeserver ignores relation filters
    When agent-a calls zooid_get_thread_history with {"thread_id": "#ops/thread-5"}
    Then the messages are thread 5 of "#ops", root first

  @mcp
  Scenario: without the relations endpoint a thread still comes back whole
    Given "#ops" has 300 messages in 6 threads from ori, mia, agent-a and agent-b
    And the homeserver answers every GET /_matrix/client/v1/rooms/*/relations/*/* with 404 M_UNRECOGNIZED
    When agent-a calls zooid_get_thread_history with {"thread_id": "#ops/thread-5"}
    Then the messages are thread 5 of "#ops", root first

  @mcp
  Scenario: without /threads or bundled aggregations the overview counts replies from its own scan
    Given "#ops" is replayed from the recorded scenario "svc-a-incident"
    And the homeserver has no /threads endpoint
    And the homeserver bundles no aggregations
    When agent-a calls zooid_get_recent_threads with {"limit": 10}
    Then the threads are the recorded top-level messages of "#ops", newest first
    And the result includes {"threads": [{"text": "status page updated: svc-a degraded 09:02–09:14, mitigated by rollback", "reply_count": 0}]}
    And the homeserver was asked no GET /_matrix/client/v1/rooms/*/relations/*/*

  @mcp
  Scenario: without bundled edits the history shows every message's newest text
    Given "#ops" is replayed from the recorded scenario "svc-a-incident"
    And the homeserver bundles no aggregations
    When agent-a calls zooid_get_history with {"limit": 200}
    Then the messages hold the recorded history of "#ops" in order

  @mcp
  Scenario: a filter applied after the page limit does not hide the history behind a run of reactions
    Given "#ops" has 40 messages in 2 threads from ori, mia, agent-a and agent-b
    And mia reacts 120 times to the last message of "#ops"
    And the homeserver filters events after the page limit
    When agent-a pages zooid_get_history with {"limit": 15} until has_more is false
    Then agent-a saw each of the 40 generated messages of "#ops" exactly once, in order

  @mcp
  Scenario: a woken agent reads the message that woke it, however late the homeserver shows it
    Given the homeserver shows new events 700 ms after their send
    And agent-a will take a turn that:
      | calls | zooid_get_history with {"limit": 5} |
      | says  | read it                             |
    When ori says in "#ops": "@agent-a what changed in svc-a?"
    Then agent-a got a result from zooid_get_history
    And the result includes {"messages": [{"sender": "@ori", "is_agent": false}]}

  # A warm session's prompt goes out before its trigger is readable; the
  # agent's tool calls are what wait for it (zooid/daemon/visible.go readGate).
  @mcp
  Scenario: an agent woken again in its thread reads the new message at once, however late the homeserver shows it
    Given agent-a will reply "looking"
    When ori says in "#ops": "@agent-a what changed in svc-a?"
    Then agent-a posts "looking" in the thread
    Given the homeserver shows new events 700 ms after their send
    And agent-a will take a turn that:
      | calls | zooid_get_thread_history with {"thread_id": "$thread"} |
      | says  | read it                                                |
    When ori replies in the thread: "and svc-b?"
    Then agent-a got a result from zooid_get_thread_history
    And the result includes {"messages": [{"sender": "@ori", "text": "and svc-b?"}]}

  @mcp
  Scenario: where the homeserver serves history to non-members, the daemon still refuses them
    Given "#ops" has 20 messages in 2 threads from ori and mia
    And the homeserver serves history to non-members
    And ori removes agent-b from "#ops"
    And the homeserver itself serves the history of "#ops" to agent-b
    When agent-b calls zooid_get_history with {"limit": 5}
    Then the call is refused with "forbidden"
    # Each turn of agent-b asks once whether its trigger is readable, sees it
    # is not a member, and goes ahead instead of polling until the bound.
    And the homeserver was asked GET /_matrix/client/v3/rooms/*/event/* at most twice

  Scenario: after a restart, the thread memory is rebuilt behind a run of reactions
    Given the daemon runs as its own process
    And agent-b will reply "svc-b is degraded"
    And agent-b will reply "yes, restarting it now"
    When ori says in "#ops": "@agent-b how is svc-b?"
    Then agent-b posts "svc-b is degraded" in the thread
    When mia reacts 520 times to the last message of "#ops"
    And the homeserver filters events after the page limit
    And the daemon is killed and started again
    And ori replies in the thread: "can you restart it?"
    Then agent-b is prompted with "can you restart it?" in a new session
    And agent-b posts "yes, restarting it now" in the thread

  Scenario: a rate-limited reply is retried and lands once
    Given "#ops" has 300 messages in 6 threads from ori, mia, agent-a and agent-b
    And agent-a will reply "on it"
    And the homeserver answers the next 2 PUT /_matrix/client/v3/rooms/*/send/*/* from agent-a with 429 M_LIMIT_EXCEEDED
    When ori says in "#ops": "@agent-a can someone audit svc-a"
    Then agent-a posts "on it" in the thread
    And the homeserver's last fault fired twice

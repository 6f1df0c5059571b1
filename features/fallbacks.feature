@fake-only
Feature: Working with homeservers that lack features or push back
  In order to run against whatever homeserver an operator has
  As an agent
  I want reads to fall back when an endpoint is missing, and posts to survive rate limits

  Background:
    Given the homeserver has users "ori" and "mia"
    And agents "agent-a" and "agent-b" are bound to "#ops"
    And "#ops" has 300 messages in 6 threads from ori, mia, agent-a and agent-b

  @mcp
  Scenario: without the /threads endpoint the overview still lists thread roots, newest first
    Given the homeserver answers every GET /_matrix/client/v1/rooms/*/threads with 404 M_UNRECOGNIZED
    When agent-a calls zooid_get_recent_threads with {"limit": 5}
    Then the result has 5 threads
    And the threads are newest first
    And no thread in the result is a thread reply

  @mcp
  Scenario: without the relations endpoint a thread still comes back whole
    Given the homeserver answers every GET /_matrix/client/v1/rooms/*/relations/*/m.thread with 404 M_UNRECOGNIZED
    And the homeserver answers every GET /_matrix/client/v1/rooms/*/relations/* with 404 M_UNRECOGNIZED
    When agent-a calls zooid_get_thread_history with {"thread_id": "#ops/thread-5"}
    Then the messages are thread 5 of "#ops", root first

  Scenario: a rate-limited reply is retried and lands once
    Given agent-a will reply "on it"
    And the homeserver answers the next 2 PUT /_matrix/client/v3/rooms/*/send/*/* from agent-a with 429 M_LIMIT_EXCEEDED
    When ori says in "#ops": "@agent-a can someone audit svc-a"
    Then agent-a posts "on it" in the thread

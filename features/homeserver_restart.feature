@fake-only
Feature: The homeserver stopped and started again on the same address with its state
  In order to trust an agent's answer across a homeserver restart
  As a person who mentioned an agent
  I want what was said during the outage to land once, and nothing run again when the
  homeserver pushes its transactions again

  While stopped, the fake homeserver closes every connection and reads each new request
  only to close it unanswered; it starts again by itself, on the same address and with all
  its state, right after it turned away the requests the scenario names (so exactly that
  many). The daemon retries a send with the same txn id, backing off, for at least a minute
  (more than its 5 tries, which last about 4 s), and a read up to 4 times. A homeserver that
  lost the acknowledgements of its transactions pushes them again with their txn ids, and
  the daemon acts on none of them twice.

  Background:
    Given the homeserver has users "ori" and "mia"
    And agents "agent-a" and "agent-b" are bound to "#ops"

  Scenario: a reply sent while the homeserver is down for 5 tries lands once, and transactions pushed again run nothing twice
    Given agent-a will take a turn that:
      | waits until | released    |
      | says        | svc-a is up |
    And agent-a will reply "svc-b is up too"
    When ori says in "#ops": "@agent-a is svc-a up?"
    Then agent-a is prompted with "is svc-a up?"
    When the homeserver stops until it has turned away 5 PUT /_matrix/client/v3/rooms/*/send/*/* from agent-a
    And agent-a's turn is released
    Then the homeserver serves again on the same address with its state
    And agent-a posts "svc-a is up" in the thread
    And the homeserver turned away 5 PUT /_matrix/client/v3/rooms/*/send/*/* from agent-a, each the send of "svc-a is up" with its txn id
    When the homeserver pushes again every transaction since "is svc-a up?", with their txn ids
    And mia replies in the thread: "@agent-a and svc-b?"
    Then agent-a posts "svc-b is up too" in the thread
    And agent-a is prompted once with "is svc-a up?"
    And agent-a is prompted once with "and svc-b?"

  Scenario: a read tool called while the homeserver is down gets its answer once it is back
    Given agent-a will take a turn that:
      | waits until | released                            |
      | calls       | zooid_get_history with {"limit": 5} |
      | says        | read it                             |
    When ori says in "#ops": "@agent-a what happened to svc-a?"
    Then agent-a is prompted with "what happened to svc-a?"
    When the homeserver stops until it has turned away 2 GET /_matrix/client/v3/rooms/*/state/m.room.member/* from agent-a
    And agent-a's turn is released
    Then the homeserver serves again on the same address with its state
    And agent-a got a result from zooid_get_history
    And the call succeeds
    And the result has 1 message
    And agent-a posts "read it" in the thread
    And the homeserver turned away 2 GET /_matrix/client/v3/rooms/*/state/m.room.member/* from agent-a

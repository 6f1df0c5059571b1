Feature: A request in flight survives a daemon crash
  In order to never have a request vanish without a trace
  As a person who mentioned an agent
  I want a turn cut short by a daemon crash answered once with a notice that it was interrupted

  The daemon journals every turn a message wakes until the turn has ended and its posts are
  sent. At start-up each unfinished turn is answered with an "interrupted" error in its
  thread: once, however often the daemon crashes.

  Background:
    Given the homeserver has users "ori" and "mia"
    And agents "agent-a" and "agent-b" are bound to "#ops"

  Scenario: the daemon is killed mid-turn and the request is answered once as interrupted
    Given the daemon runs as its own process
    And agent-a will take a turn that:
      | waits until | released   |
      | says        | svc-a is up |
    When ori says in "#ops": "@agent-a is svc-a up?"
    Then agent-a is prompted with "is svc-a up?"
    When the daemon is killed and started again
    Then agent-a posts an error "interrupted" in the thread
    And agent-a has posted nothing containing "svc-a is up"
    When the daemon is killed and started again
    Then agent-a posts an error "interrupted" in the thread
    And agent-a is prompted once with "is svc-a up?"

  @fake-only
  Scenario: a recovery cut short is finished by the next start, still once
    Given the daemon runs as its own process
    And agent-a will take a turn that:
      | waits until | released   |
      | says        | svc-a is up |
    When ori says in "#ops": "@agent-a is svc-a up?"
    Then agent-a is prompted with "is svc-a up?"
    Given the homeserver answers the next 1 PUT /_matrix/client/v3/rooms/*/send/dev.zooid.error/* from agent-a with 403 M_FORBIDDEN
    When the daemon is killed and started again
    Then the homeserver's last fault fired once
    When the daemon is killed and started again
    Then agent-a posts an error "interrupted" in the thread
    When the daemon is killed and started again
    Then agent-a posts an error "interrupted" in the thread

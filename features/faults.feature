@fake-only
Feature: A homeserver that refuses, fails or drops requests mid-turn
  In order to trust an agent's answer when the homeserver misbehaves
  As a person who mentioned an agent
  I want every request answered exactly once, and a tool that can't read told so plainly

  The daemon retries what the homeserver refused for a passing reason: a 429 after the
  retry_after_ms it asked for, a 5xx or a dropped connection after a backoff. Posts keep
  their txn id across retries, so a post whose answer was lost is not posted twice. A read
  tool that still fails after its retries returns "unavailable" to the agent, and the
  session goes on. A homeserver that accepts a request and never answers holds a tool call
  only until the call's deadline (tool_timeout), and one try of a post only until
  post_timeout, after which the post is tried again with the same txn id. The names in a new
  session's header (the room's alias, the sender's display name) are read for at most 5 seconds:
  a homeserver that never answers them does not hold the first prompt longer.

  Background:
    Given the homeserver has users "ori" and "mia"
    And agents "agent-a", "agent-b" and "agent-c" are bound to "#ops"

  Scenario: a 429 storm on sends: every mention is answered once, each retry after the wait asked
    Given agent-a will reply "svc-a is up"
    And agent-b will reply "svc-b is up"
    And agent-c will reply "svc-c is up"
    And the homeserver answers the next 3 PUT /_matrix/client/v3/rooms/*/send/*/* from agent-a with 429 M_LIMIT_EXCEEDED, retry after 700 ms
    And the homeserver answers the next 3 PUT /_matrix/client/v3/rooms/*/send/*/* from agent-b with 429 M_LIMIT_EXCEEDED, retry after 700 ms
    And the homeserver answers the next 3 PUT /_matrix/client/v3/rooms/*/send/*/* from agent-c with 429 M_LIMIT_EXCEEDED, retry after 700 ms
    When ori says in "#ops": "@agent-a is svc-a up?"
    And mia says in "#ops": "@agent-b is svc-b up?"
    And ori says in "#ops": "@agent-c is svc-c up?"
    Then agent-a posts "svc-a is up" in the thread of "is svc-a up?"
    And agent-b posts "svc-b is up" in the thread of "is svc-b up?"
    And agent-c posts "svc-c is up" in the thread of "is svc-c up?"
    And every request the homeserver refused was asked again 700 ms or more later
    And agent-a is prompted once with "is svc-a up?"
    And agent-b is prompted once with "is svc-b up?"
    And agent-c is prompted once with "is svc-c up?"

  Scenario: a 429 storm on reads: the tool waits the retry_after_ms asked, then reads
    Given agent-a is answering a mention in "#ops"
    And the homeserver answers the next 3 GET /_matrix/client/v3/rooms/*/messages from agent-a with 429 M_LIMIT_EXCEEDED, retry after 700 ms
    When agent-a calls zooid_get_history with {"limit": 5}
    Then the call succeeds
    And the homeserver's last fault fired 3 times
    And every request the homeserver refused was asked again 700 ms or more later

  Scenario: a reply whose answer the homeserver dropped is posted once
    Given agent-a will reply "svc-a is up"
    And the homeserver drops the next 2 PUT /_matrix/client/v3/rooms/*/send/*/* from agent-a after handling them
    When ori says in "#ops": "@agent-a is svc-a up?"
    Then agent-a posts "svc-a is up" in the thread
    And the homeserver's last fault fired twice

  Scenario: a reply the homeserver failed with 5xx and lost connections is posted once
    Given agent-a will reply "svc-a is up"
    And the homeserver answers the next 2 PUT /_matrix/client/v3/rooms/*/send/*/* from agent-a with 502 M_UNKNOWN
    And the homeserver drops the next 1 PUT /_matrix/client/v3/rooms/*/send/*/* from agent-a before handling it
    When ori says in "#ops": "@agent-a is svc-a up?"
    Then agent-a posts "svc-a is up" in the thread
    And the homeserver's last fault fired once

  Scenario: a read tool on a homeserver that drops every connection is told to try again, and the session goes on
    Given agent-a is answering a mention in "#ops"
    And the homeserver drops every GET /_matrix/client/v3/rooms/*/messages from agent-a before handling them
    When agent-a calls zooid_get_history with {"limit": 5}
    Then the call is refused with "unavailable"
    When the homeserver answers normally again
    And agent-a will reply "svc-a is up"
    And ori replies in the thread: "and now?"
    Then agent-a is prompted with "and now?" in the same session as "please take a look"
    And agent-a posts "svc-a is up" in the thread

  Scenario: a read tool on a homeserver failing with 5xx is told to try again, and the session goes on
    Given agent-a is answering a mention in "#ops"
    And the homeserver answers every GET /_matrix/client/v3/rooms/*/messages from agent-a with 503 M_UNKNOWN
    When agent-a calls zooid_get_history with {"limit": 5}
    Then the call is refused with "unavailable"
    And the homeserver's last fault fired 4 times
    When the homeserver answers normally again
    And agent-a calls zooid_get_history with {"limit": 5}
    Then the call succeeds

  Scenario: a read tool on a homeserver that accepts and never answers gives up at the call's deadline, and the session goes on
    Given tool calls give up after 2 seconds
    And agent-a is answering a mention in "#ops"
    And the homeserver holds every GET /_matrix/client/v3/rooms/*/messages from agent-a before handling them, never answering
    When agent-a calls zooid_get_history with {"limit": 5}
    Then the call is refused with exactly "unavailable: the homeserver did not answer within 2s; try again"
    And the homeserver's last fault fired once
    When the homeserver answers normally again
    And agent-a will reply "svc-a is up"
    And ori replies in the thread: "and now?"
    Then agent-a is prompted with "and now?" in the same session as "please take a look"
    And agent-a posts "svc-a is up" in the thread

  Scenario: a homeserver that never answers the reads of a new session's header holds its first prompt only for their bound
    Given agent-a will reply "svc-a is up"
    And the homeserver holds the next 1 GET /_matrix/client/v3/rooms/*/state/m.room.member/* from agent-a before handling it, never answering
    When ori says in "#ops": "@agent-a is svc-a up?"
    Then agent-a is prompted with "from: ori (@ori"
    And agent-a posts "svc-a is up" in the thread
    And the homeserver's last fault fired once

  Scenario: a reply the homeserver made but never answered is tried again after the post's deadline and posted once
    Given a post the homeserver leaves unanswered is tried again after 1 second
    And agent-a will reply "svc-a is up"
    And the homeserver holds the next 1 PUT /_matrix/client/v3/rooms/*/send/*/* from agent-a after handling it, never answering
    When ori says in "#ops": "@agent-a is svc-a up?"
    Then agent-a posts "svc-a is up" in the thread
    And the homeserver's last fault fired once
    And every request the homeserver refused was asked again 1000 ms or more later
    And agent-a is prompted once with "is svc-a up?"

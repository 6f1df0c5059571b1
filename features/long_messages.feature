Feature: Long messages
  In order to read an agent's long answer on a real homeserver, which refuses events over 64 KiB
  As a person in the room
  I want a long reply to arrive as several messages in order, and a too long zooid_send_message refused with a reason

  Background:
    Given the homeserver has users "ori"
    And agent "agent-a" is bound to "#ops"

  Scenario: a reply too long for one event arrives as several notices in the thread, in order
    Given agent-a will reply with 150000 bytes of prose
    When ori says in "#ops": "@agent-a write the full audit report"
    Then agent-a's long reply arrives in the thread as 4 notices

  Scenario: a message at the limit is posted whole
    When agent-a calls zooid_send_message in "#ops" with 49152 bytes of prose
    Then the call succeeds
    And agent-a posts the 49152 bytes of prose whole top-level in "#ops"

  Scenario: a message over the limit is refused and nothing is posted
    When agent-a calls zooid_send_message in "#ops" with 70000 bytes of prose
    Then the call is refused with "too_large"
    And agent-a has posted nothing containing "long report"

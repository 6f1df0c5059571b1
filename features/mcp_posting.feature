@mcp
Feature: Posting as the agent
  In order to report progress where people will see it
  As an agent
  I want to post top-level or into a thread of any room I am in, as myself, and nowhere else

  Background:
    Given the homeserver has users "ori" and "mia"
    And agent "agent-a" is bound to "#ops" and "#dev"
    And agent "agent-b" is bound to "#private"

  Scenario: a top-level message
    When agent-a calls zooid_send_message with {"room": "#ops", "text": "deploy window opens at 14:00"}
    Then the call succeeds
    And agent-a posts "deploy window opens at 14:00" top-level in "#ops"

  Scenario: a message into the thread being answered
    Given agent-a is answering a mention in "#ops"
    When agent-a calls zooid_send_message with {"room": "#ops", "thread_id": "$thread", "text": "halfway through the audit"}
    Then the call succeeds
    And the result includes {"thread_id": "$thread"}
    And agent-a posts "halfway through the audit" in the thread

  Scenario: a message into another room the agent is bound to
    Given agent-a is answering a mention in "#ops"
    When agent-a calls zooid_send_message with {"room": "#dev", "text": "heads-up: svc-a audit running"}
    Then the call succeeds
    And agent-a posts "heads-up: svc-a audit running" top-level in "#dev"

  Scenario: a room the agent is not in is refused
    When agent-a calls zooid_send_message with {"room": "#private", "text": "sneaky"}
    Then the call is refused with "not_in_room"
    And agent-a has posted nothing containing "sneaky"

  Scenario Outline: a room in any form zooid.yaml accepts is a target
    When agent-a calls zooid_send_message with {"room": "<room>", "text": "status: green"}
    Then the call succeeds
    And agent-a posts "status: green" top-level in "#dev"

    Examples:
      | room        |
      | #dev        |
      | #dev:alias  |
      | #dev:short  |

  Scenario: a room the agent is still in but zooid.yaml no longer binds is neither listed nor a target
    Given agent-a is still a member of "#old", which zooid.yaml does not bind it to
    When agent-a calls zooid_get_rooms
    Then the result has 2 rooms
    And the result includes {"rooms": [{"id": "#ops"}, {"id": "#dev"}]}
    When agent-a calls zooid_send_message with {"room": "#old", "text": "sneaky"}
    Then the call is refused with "not_in_room"
    And agent-a has posted nothing containing "sneaky"

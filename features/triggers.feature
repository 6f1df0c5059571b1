@routing
Feature: Who is woken by a message
  In order to talk to the right agent without waking the others
  As a person in a Matrix room
  I want an agent to wake only when a message is meant for it, in a room it serves

  Background:
    Given the homeserver has users "ori" and "mia"
    And agents "agent-a" and "agent-b" are bound to "#ops"

  Scenario: a mention wakes the mentioned agent, and only it
    When ori says in "#ops": "@agent-a can someone audit svc-a"
    Then agent-a is prompted with "can someone audit svc-a"
    And agent-b is not prompted with "can someone audit svc-a"

  Scenario: a client without m.mentions still wakes an agent named in the body
    When ori says in "#ops" without m.mentions: "agent-b, is svc-b healthy?"
    Then agent-b is prompted with "is svc-b healthy?"
    And agent-a is not prompted with "is svc-b healthy?"

  Scenario: a message mentioning nobody wakes no mention-triggered agent
    When mia says in "#ops": "lunch at noon"
    Then agent-a is not prompted with "lunch at noon"
    And agent-b is not prompted with "lunch at noon"

  Scenario: an agent with trigger any hears every message of its rooms
    Given agent "agent-c" is bound to "#ops" with trigger any
    When mia says in "#ops": "deploy finished"
    Then agent-c is prompted with "deploy finished"
    And agent-a is not prompted with "deploy finished"

  Scenario: an agent never wakes on its own message
    Given agent "agent-c" is bound to "#ops" with trigger any
    And agent-c will reply "noted, watching the deploy"
    When mia says in "#ops": "deploy started"
    Then agent-c posts "noted, watching the deploy" in the thread
    And agent-c is not prompted with "noted, watching the deploy"

  Scenario: an agent is not woken in a room it is not bound to
    Given agent "agent-c" is bound to "#dev" with trigger any
    When ori says in "#random": "@agent-a @agent-c anyone here?"
    Then agent-a is not prompted with "anyone here?"
    And agent-c is not prompted with "anyone here?"

  Scenario: a notice wakes no one, even one that mentions an agent
    Bots post notices and don't answer them, so two bots can't talk each other into a loop.
    When mia says in "#ops" with {"msgtype": "m.notice"}: "@agent-a deploy finished"
    Then agent-a is not prompted with "deploy finished"

  Scenario: a person's message carrying a task field is an ordinary message
    Only task roots the daemon posted itself open task threads.
    Given agent "agent-c" is bound to "#ops" with trigger any
    When ori says in "#ops" with {"dev.zooid.thread_start": {"version": 1, "assignee": "agent-b", "attempt_id": "zt0"}}: "audit svc-a"
    Then agent-c is prompted with "audit svc-a"
    And agent-b is not prompted with "audit svc-a"

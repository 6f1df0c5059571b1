@routing
Feature: How an agent's reply lands in the room
  In order to read an agent's answer where I asked, without notification noise
  As a person in a Matrix room
  I want its streamed prose posted as whole notices in my thread, and failures said out loud

  Background:
    Given the homeserver has users "ori" and "mia"
    And agent "agent-a" is bound to "#ops"

  Scenario: streamed chunks are posted as one whole m.notice in the thread
    Given agent-a will reply "checked svc-a: all 12 pods healthy, no restarts today" in 6 chunks
    When ori says in "#ops": "@agent-a can someone audit svc-a"
    Then agent-a posts "checked svc-a: all 12 pods healthy, no restarts today" in the thread

  Scenario: replies in two threads stay in their own threads
    Given agent-a will reply "svc-a is fine"
    And agent-a will reply "svc-b is degraded"
    When ori says in "#ops": "@agent-a audit svc-a"
    And agent-a posts "svc-a is fine" in the thread
    And mia says in "#ops": "@agent-a audit svc-b"
    Then agent-a posts "svc-b is degraded" in the thread of "audit svc-b"
    And agent-a posts "svc-a is fine" in the thread of "audit svc-a"

  Scenario: a crashed agent leaves an error notice, and the next message recovers in a fresh session
    Given agent-a will crash
    And agent-a will reply "back again"
    When ori says in "#ops": "@agent-a can someone audit svc-a"
    Then agent-a posts an error "agent_crashed" in the thread
    When ori replies in the thread: "@agent-a try again please"
    Then agent-a posts "back again" in the thread
    And agent-a is prompted with "try again please" in a new session

  Scenario: a hung agent is cancelled at the turn timeout with an error notice
    Given a turn times out after 1 second
    And agent-a will hang
    When ori says in "#ops": "@agent-a can someone audit svc-a"
    Then agent-a posts an error "agent_timeout" in the thread

  Scenario: a transaction pushed again is not handled twice
    Given agent-a will reply "on it"
    When ori says in "#ops": "@agent-a can someone audit svc-a"
    And agent-a posts "on it" in the thread
    And the daemon is pushed the last message again
    Then agent-a is prompted once with "can someone audit svc-a"
    And agent-a posts "on it" in the thread

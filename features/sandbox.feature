@sandbox
Feature: Agents of the daemon's own uid are sandboxed
  In order that an agent run as the daemon's user can't take its tokens, its state or another agent
  As an operator
  I want every local agent held by a Landlock sandbox by default: the system's files and its own, nothing of the daemon's

  Background:
    Given the homeserver has users "ori"
    And agents "agent-a" and "agent-b" are bound to "#ops"

  @landlock
  Scenario: a sandboxed agent reaches nothing the daemon keeps from it
    Given agent-b is answering a mention in "#ops"
    When agent-a tries to reach what the daemon keeps from it
    Then every reach of agent-a was refused

  @landlock
  Scenario: a sandboxed agent reaches its own files, its socket and the system's, and its tools work
    When agent-a tries to reach its own files and the system's
    Then every reach of agent-a succeeded
    When agent-a runs a tool it writes in its working directory
    Then the tool of agent-a ran
    When agent-a calls zooid_get_room_info
    Then the call succeeds

  Scenario: with sandbox none, the same agent reaches what the daemon keeps
    Given agents run without a sandbox
    And agent-b is answering a mention in "#ops"
    When agent-a tries to reach what the daemon keeps from it
    Then every reach of agent-a succeeded

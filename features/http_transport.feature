@mcp
Feature: Agents reached over HTTP get no Zooid MCP
  In order to use an agent from a webhook, with no room behind the request
  As an operator wiring a job to an agent
  I want one request to run one turn, streamed back, and no room tools handed to the agent

  An HTTP session owns no durable conversation, so the daemon puts no Zooid MCP server into
  its session/new: there is no room to read and no thread to post in. Matrix-bound agents of
  the same daemon keep theirs.

  Background:
    Given the homeserver has user "ori"
    And agent "agent-a" is bound to "#ops"
    And agent "hook" is bound to HTTP

  Scenario: a prompt over HTTP streams the turn back, and the agent got no MCP server
    Given hook will reply "build 1234 is green" in 3 chunks
    When hook is asked over HTTP: "how is build 1234?"
    Then the HTTP answer streams "build 1234 is green" and ends with end_turn
    And hook is prompted with "how is build 1234?"
    And hook's session/new has no MCP server

  Scenario: a Matrix-bound agent of the same daemon still gets its Zooid MCP server
    When ori says in "#ops": "@agent-a status?"
    Then agent-a is prompted with "status?"
    And agent-a's session/new offers the zooid MCP server over stdio

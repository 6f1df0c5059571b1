Feature: An agent that floods its output
  In order to keep one runaway agent from costing the daemon without bound
  As a person in the room
  I want the thread to get what one turn may post, told how much more was dropped

  A turn posts at most daemon.MaxTurnProse bytes of prose (four messages of
  zevent.MaxBodyBytes); the rest is dropped as it streams in, never buffered.

  Background:
    Given the homeserver has users "ori"
    And agent "agent-a" is bound to "#ops"

  Scenario: a 2 MB reply arrives cut to what one turn may post, with a notice, and the session goes on
    Streaming 2 MB through ACP takes seconds of CPU under the race detector on a loaded machine:
    the turn is given a minute, so what this shows is the cut, not a turn timeout's notice.
    Given a turn times out after 60 seconds
    And agent-a will flood the thread with 2000000 bytes of prose
    When ori says in "#ops": "@agent-a dump every log line you have"
    Then agent-a's flood arrives in the thread cut to what one turn may post, with a notice
    When ori replies in the thread: "@agent-a and in short?"
    Then agent-a is prompted with "and in short?" in the same session as "dump every log line"

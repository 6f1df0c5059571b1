@recorded
Feature: A recorded room played through the daemon
  In order to reproduce a routing bug from a real room
  As a maintainer with a recording of that room
  I want its events pushed to a running daemon as the homeserver pushed them, with its agents configured as they were

  Background:
    Given the homeserver has users "ori" and "mia"
    And "#ops" is played from the recording "svc-a-incident"

  Scenario: a recorded mention wakes the recorded agent, and a later one in its thread reaches the same session
    When the recording of "#ops" is played
    Then agent-a is prompted with "svc-a p99 latency alarm firing since 09:02, can you dig in?"
    And agent-a is prompted with "can you confirm from the config diff?" in the same session as "svc-a p99 latency alarm firing"
    And agent-b is prompted with "rolling back 8812 now, please watch the pods"
    And agent-b is not prompted with "svc-a p99 latency alarm"

  Scenario: a human reply into a recorded thread by label goes to the agent that last posted there
    Given the recording of "#ops" is played
    When ori replies in the recorded thread "postmortem-doc-for" of "#ops": "who owns the pool size check?"
    Then agent-a is prompted with "who owns the pool size check?"
    And agent-b is not prompted with "who owns the pool size check?"

  Scenario: a thread of the recording is found by its root's text, and a partial play stops at the label
    Given the recording of "#ops" is played up to "rolling-back-8812"
    When mia replies in the thread of "rolling back 8812 now": "how far along?"
    Then agent-b is prompted with "how far along?" in the same session as "rolling back 8812 now"
    And agent-a is not prompted with "postmortem doc"

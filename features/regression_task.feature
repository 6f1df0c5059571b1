Feature: a recorded task fan-out still admits, runs, closes and reports the task
  Built with `zooid replay --feature features/regression_task.feature scenarios/ops-task-traced.json`
  from a room recorded with the daemon's trace: agent-a fans out one task to agent-b and one to an
  agent that does not exist (refused). The Background plays the recording through today's daemon;
  agent-a's tool call and agent-b's answer come from the trace.

  Background:
    Given "#ops" is played from the recording "ops-task-traced"

  Scenario: the recording plays as it was recorded
    When the recording of "#ops" is played
    Then agent-a is prompted with "please audit svc-a and svc-b"
    And agent-b is prompted with "audit svc-a"
    And the trace of "#ops" records agent-b's task closed complete
    And agent-a is prompted with "svc-a has two open CVEs"
    And the trace of "#ops" records nobody-here's task refused
    And the trace of "#ops" records agent-b's task reported

Feature: after a recorded daemon restart the agent still answers in the thread it was asked in
  Built with `zooid replay --feature features/regression_restart.feature scenarios/ops-restart-traced.json`
  from a room recorded with the daemon's trace, in which the daemon was killed and started again
  between the question and the bare reply in its thread. The restart is replayed where the trace
  has it.

  Background:
    Given "#ops" is played from the recording "ops-restart-traced"
    And the daemon runs as its own process

  Scenario: the recording plays as it was recorded
    When the recording of "#ops" is played up to "3"
    And the daemon is killed and started again
    And the recording of "#ops" is played
    Then agent-b is prompted with "is svc-a healthy after the restart?"
    And agent-b posts "svc-a is healthy" in the thread of "is svc-a healthy after the restart?"
    And agent-b is prompted with "and svc-b?"
    And agent-b posts "svc-b restarted cleanly as well" in the thread of "is svc-a healthy after the restart?"

Feature: a recorded room's routing holds: mentions, a mention in a thread, a bare reply to the last addressee
  Built with `zooid replay --feature features/regression_routing.feature scenarios/ops-routing-traced.json`
  from a room recorded with the daemon's trace (features/replay.feature shows how one is made).
  The Background plays the recording through today's daemon: humans' events are sent as they
  were, the agents answer with the turns the trace recorded, and the daemon makes its own posts
  again. The harness's own probes of the recording run were taken out of the Then-steps.

  Background:
    Given "#ops" is played from the recording "ops-routing-traced"

  Scenario: the recording plays as it was recorded
    When the recording of "#ops" is played
    Then agent-a is prompted with "svc-a p99 is slow, can you look?"
    And agent-a posts "checking the p99 of svc-a" in the thread of "svc-a p99 is slow, can you look?"
    And agent-b is prompted with "did the deploy change the pool?"
    And agent-b posts "the deploy at 09:02 doubled the pool" in the thread of "svc-a p99 is slow, can you look?"
    And agent-b is prompted with "and svc-b?"
    And agent-b posts "svc-b is fine too" in the thread of "svc-a p99 is slow, can you look?"

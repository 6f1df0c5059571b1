Feature: The daemon's flight recorder
  In order to turn a report from a real room into a scenario that fails
  As a maintainer of Zooid
  I want the daemon to write down, per room and in order, what it saw and what it did

  The trace (zooid run --trace DIR, or trace: in zooid.yaml) holds each inbound event
  with the routing decision taken on it (whom it woke and why, or why nobody; a reset, a
  thread read back first, a task root), each prompt, each tool call with its result,
  each post and each task step. It never holds a token or a session binding id.

  Background:
    Given the homeserver has users "ori" and "mia"
    And agents "planner" and "coder" are bound to "#ops"
    And the daemon keeps a trace

  Scenario: a mention, a reply, a tool call and a task are traced with their decisions
    Given planner will reply "looking at svc-a"
    And coder will reply "svc-a is clean"
    When ori says in "#ops": "@planner please check svc-a"
    And planner posts "looking at svc-a" in the thread
    And mia replies in the thread: "and svc-b too"
    And planner calls zooid_get_recent_threads with {"limit": 5}
    And planner calls zooid_start_task_threads with {"tasks": [{"agent": "coder", "prompt": "audit svc-a"}, {"agent": "nobody-here", "prompt": "x"}]}
    Then the task "audit svc-a" ends complete with "svc-a is clean"
    And the trace of "#ops" shows "please check svc-a" waking planner (mention)
    And the trace of "#ops" shows "and svc-b too" waking planner (addressee)
    And the trace of "#ops" shows "looking at svc-a" waking nobody (agent_post)
    And the trace of "#ops" shows "audit svc-a" waking coder (task_assignee)
    And the trace of "#ops" records the decision on "audit svc-a" as the task root of coder
    And the trace of "#ops" records the decision on "and svc-b too" as neither reset, recall nor task root
    And the trace of "#ops" records planner posting "looking at svc-a"
    And the trace of "#ops" records planner calling zooid_get_recent_threads and its result
    And the trace of "#ops" records nobody-here's task refused
    And the trace of "#ops" records coder's task started
    And the trace of "#ops" records coder's task closed complete
    And the trace of "#ops" records coder's task reported
    And no secret appears in the trace

  Scenario: an agent crash and a daemon restart are traced
    Given the daemon runs as its own process
    And planner will crash
    When ori says in "#ops": "@planner please check svc-a"
    Then planner posts an error "agent_crashed" in the thread
    And the trace of "#ops" records the daemon starting
    And the trace of "#ops" records planner crashed
    When the daemon is killed and started again
    Then the trace of "#ops" records the daemon restarting
    And no secret appears in the trace

  Scenario: a bare reply after a restart is decided on a recall of its thread, and /clear as a reset
    Given the daemon runs as its own process
    And planner will reply "looking at svc-a"
    When ori says in "#ops": "@planner please check svc-a"
    Then planner posts "looking at svc-a" in the thread
    And the trace of "#ops" records planner's turn ended
    When the daemon is killed and started again
    And ori replies in the thread: "any news?"
    Then planner is prompted with "any news?" in a new session
    And the trace of "#ops" shows "any news?" waking planner (addressee)
    And the trace of "#ops" records the decision on "any news?" as a recall of its thread
    And the trace of "#ops" records the decision on "please check svc-a" as neither reset, recall nor task root
    When ori clears the thread
    Then the trace of "#ops" records a reset of the thread of "please check svc-a"

Feature: zooid replay tells whether today's daemon does what a recorded trace says
  In order to turn a report from a real room into a scenario that fails on today's code
  As a maintainer of Zooid
  I want a recording with the daemon's trace replayed through a fresh daemon and compared

  `zooid replay FILE` plays the recording on a fresh fake homeserver with the recorded agents
  configured, each agent answering every prompt with the turn the trace recorded for it, and
  compares the new trace with the recorded one: exit 0 when they agree, 1 with the differences.

  Background:
    Given the homeserver has users "ori" and "mia"
    And agents "planner" and "coder" are bound to "#ops"
    And the daemon keeps a trace

  Scenario: a busy room with mentions, threads, a task fan-out and a restart replays, and an edited decision is named
    Given the daemon runs as its own process
    And planner will reply "looking at svc-a"
    And coder will reply "svc-a is clean"
    When ori says in "#ops": "@planner please check svc-a"
    Then planner posts "looking at svc-a" in the thread
    When mia replies in the thread: "and svc-b too"
    Then planner is prompted with "and svc-b too"
    When planner calls zooid_start_task_threads with {"tasks": [{"agent": "coder", "prompt": "audit svc-a"}]}
    Then the task "audit svc-a" ends complete with "svc-a is clean"
    And planner is woken once with the result of "audit svc-a"
    When the daemon is killed and started again
    And ori says in "#ops": "@coder is svc-c up?"
    Then coder is prompted with "is svc-c up?"
    When "#ops" is recorded with its trace as planner
    Then zooid replay of the recording exits 0
    When the recorded decision on "and svc-b too" is edited to wake nobody
    Then zooid replay of the recording exits 1
    And the replay names one difference: the decision on "and svc-b too", want woke nobody, got woke planner

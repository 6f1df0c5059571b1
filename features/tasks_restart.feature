Feature: Task threads survive a daemon restart
  In order to never lose track of delegated work
  As an agent that started task threads
  I want every task that was open when the daemon died reported once when it comes back

  The daemon journals each task. Tasks found open at start-up are closed cancelled
  (interrupted_by_restart) and reported like any other result; tasks already reported
  are not reported again.

  Background:
    Given the homeserver has users "ori" and "mia"
    And agents "planner", "coder", "reviewer" and "tester" are bound to "#ops"

  Scenario: the daemon is killed mid fan-out and every task ends reported exactly once
    Given the daemon runs as its own process
    And tester will reply "svc-c tests pass"
    And coder will hang
    And reviewer will hang
    When ori says in "#ops": "@planner please get three services checked"
    And planner calls zooid_start_task_threads with {"tasks": [{"agent": "coder", "prompt": "audit svc-a"}, {"agent": "reviewer", "prompt": "review svc-b"}, {"agent": "tester", "prompt": "test svc-c"}]}
    Then tasks 1, 2 and 3 are started
    And the task "test svc-c" ends complete with "svc-c tests pass"
    And planner is woken once with the result of "test svc-c"
    And coder is prompted with "audit svc-a"
    And reviewer is prompted with "review svc-b"
    When the daemon is killed and started again
    Then the task "audit svc-a" ends cancelled (interrupted_by_restart)
    And the task "review svc-b" ends cancelled (interrupted_by_restart)
    And planner's thread gets a notice with the result of "audit svc-a"
    And planner's thread gets a notice with the result of "review svc-b"
    And planner is woken once with the result of "audit svc-a"
    And planner is woken once with the result of "review svc-b"
    And planner is woken once with the result of "test svc-c"
    And the task "test svc-c" ends complete with "svc-c tests pass"
    And planner's thread gets a notice with the result of "test svc-c"
    And planner is prompted with "[zooid] This thread has messages from before this session: catch up with zooid_get_thread_history"

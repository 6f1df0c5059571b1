Feature: How a task ends
  In order to get a clear result back from every task I delegate
  As an agent that started a task thread
  I want each assignee turn judged by fixed rules, and the task closed exactly once

  At the end of each assignee turn the task is judged: an error fails it, a cancelled
  turn cancels it, running out of tokens makes it partial; otherwise a summary recorded
  with zooid_complete_task is the result, else the assignee's last words are, else the
  task failed with no result. The result is posted in the task thread as
  dev.zooid.thread_result and the caller is woken with it once.

  Background:
    Given the homeserver has users "ori" and "mia"
    And agents "planner" and "coder" are bound to "#ops"

  Scenario: a summary recorded with zooid_complete_task is the result, and the turn goes on
    Given coder will take a turn that:
      | calls | zooid_complete_task with {"summary": "svc-a is clean: 0 findings"} |
      | says  | writing up the details now                                          |
    When ori says in "#ops": "@planner get svc-a looked at"
    And planner calls zooid_start_task_threads with {"tasks": [{"agent": "coder", "prompt": "audit svc-a"}]}
    Then coder got a result from zooid_complete_task
    And the result includes {"status": "recorded"}
    And the task "audit svc-a" ends complete with "svc-a is clean: 0 findings"
    And coder posts "writing up the details now" in the thread of "audit svc-a"
    And planner is woken once with the result of "audit svc-a"

  Scenario: the first summary wins
    Given coder will take a turn that:
      | calls | zooid_complete_task with {"summary": "svc-a is clean"}                |
      | calls | zooid_complete_task with {"summary": "on second thought, one finding"} |
    When ori says in "#ops": "@planner get svc-a looked at"
    And planner calls zooid_start_task_threads with {"tasks": [{"agent": "coder", "prompt": "audit svc-a"}]}
    Then coder got a result from zooid_complete_task
    And the result includes {"status": "recorded"}
    And coder got a result from zooid_complete_task
    And the result includes {"status": "already_recorded"}
    And the task "audit svc-a" ends complete with "svc-a is clean"

  Scenario: an empty summary is an input error the assignee can correct
    Given coder will take a turn that:
      | calls | zooid_complete_task with {"summary": ""} |
      | says  | svc-a is clean                           |
    When ori says in "#ops": "@planner get svc-a looked at"
    And planner calls zooid_start_task_threads with {"tasks": [{"agent": "coder", "prompt": "audit svc-a"}]}
    Then coder got a result from zooid_complete_task
    And the call is refused with "invalid_argument"
    And the task "audit svc-a" ends complete with "svc-a is clean"

  Scenario: without a summary, the assignee's last words are the result
    Given coder will take a turn that:
      | says  | looking at svc-a now |
      | calls | zooid_get_room_info  |
      | says  | svc-a is clean       |
    When ori says in "#ops": "@planner get svc-a looked at"
    And planner calls zooid_start_task_threads with {"tasks": [{"agent": "coder", "prompt": "audit svc-a"}]}
    Then the task "audit svc-a" ends complete with "svc-a is clean"
    And planner is woken once with the result of "audit svc-a"

  Scenario: a turn that says nothing and records nothing fails with no result
    Given coder will take a turn that:
      | stops with | end_turn |
    When ori says in "#ops": "@planner get svc-a looked at"
    And planner calls zooid_start_task_threads with {"tasks": [{"agent": "coder", "prompt": "audit svc-a"}]}
    Then the task "audit svc-a" ends failed (no_result)
    And planner is woken once with the result of "audit svc-a"

  Scenario: a cancelled turn cancels the task
    Given coder will take a turn that:
      | says       | starting on svc-a |
      | stops with | cancelled         |
    When ori says in "#ops": "@planner get svc-a looked at"
    And planner calls zooid_start_task_threads with {"tasks": [{"agent": "coder", "prompt": "audit svc-a"}]}
    Then the task "audit svc-a" ends cancelled (turn_cancelled)
    And planner is woken once with the result of "audit svc-a"

  Scenario: running out of tokens makes the task partial, keeping what was said
    Given coder will take a turn that:
      | says       | svc-a: 3 of 5 checks done |
      | stops with | max_tokens                |
    When ori says in "#ops": "@planner get svc-a looked at"
    And planner calls zooid_start_task_threads with {"tasks": [{"agent": "coder", "prompt": "audit svc-a"}]}
    Then the task "audit svc-a" ends partial (max_tokens) with "svc-a: 3 of 5 checks done"
    And planner is woken once with the result of "audit svc-a"

  Scenario: an assignee that crashes fails the task, keeping what it had said
    Given coder will take a turn that:
      | says    | checking svc-a |
      | crashes |                |
    When ori says in "#ops": "@planner get svc-a looked at"
    And planner calls zooid_start_task_threads with {"tasks": [{"agent": "coder", "prompt": "audit svc-a"}]}
    Then the task "audit svc-a" ends failed (agent_error) with "checking svc-a"
    And planner is woken once with the result of "audit svc-a"
    And planner's thread gets a notice with the result of "audit svc-a"

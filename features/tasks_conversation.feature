Feature: Working inside a task thread
  In order to finish a delegated task well
  As an assignee, a person watching it, or the agent that delegated it
  I want to steer, hand off and hear back without the task losing its way

  A bare human reply in a task thread goes to the assignee. An assignee that mentions
  another agent in its prose hands work to it: the callee runs in its own
  session of the thread, and its result wakes the assignee. The caller hears the
  task's result once, as a new turn of its original session, never in the middle of
  another turn, and not at all once its thread was cleared.

  Background:
    Given the homeserver has users "ori" and "mia"
    And agents "planner", "coder" and "reviewer" are bound to "#ops"

  Scenario: a person steers the assignee with a bare reply in the task thread
    Given coder will reply "@ori should I include svc-b in the audit?"
    And coder will reply "svc-a and svc-b are clean"
    When ori says in "#ops": "@planner get svc-a looked at"
    And planner calls zooid_start_task_threads with {"tasks": [{"agent": "coder", "prompt": "audit svc-a"}]}
    Then planner has started 1 task thread in "#ops"
    And coder posts "@ori should I include svc-b in the audit?" in the thread of "audit svc-a"
    When ori replies in the thread of "audit svc-a": "yes, svc-b too"
    Then coder is prompted with "yes, svc-b too" in the same session as "audit svc-a"
    And the task "audit svc-a" ends complete with "svc-a and svc-b are clean"
    And planner is woken once with the result of "audit svc-a"

  Scenario: the assignee hands part of the work to another agent by mentioning it
    Given coder will reply "@reviewer please check the TLS certificates of svc-a"
    And reviewer will reply "certificates valid until 2027" after 0.3 seconds
    And coder will reply "svc-a is clean; certificates valid until 2027"
    When ori says in "#ops": "@planner get svc-a looked at"
    And planner calls zooid_start_task_threads with {"tasks": [{"agent": "coder", "prompt": "audit svc-a"}]}
    Then reviewer is prompted with "please check the TLS certificates of svc-a" in a new session
    And coder is prompted with "certificates valid until 2027" in the same session as "audit svc-a"
    And the task "audit svc-a" ends complete with "svc-a is clean; certificates valid until 2027"
    And planner is woken once with the result of "audit svc-a"

  Scenario: a callee answering the assignee by name is replying, not handing off again
    Given coder will reply "@reviewer please check the TLS certificates of svc-a"
    And reviewer will reply "@coder certificates valid until 2027"
    And coder will reply "svc-a is clean"
    When ori says in "#ops": "@planner get svc-a looked at"
    And planner calls zooid_start_task_threads with {"tasks": [{"agent": "coder", "prompt": "audit svc-a"}]}
    Then coder is prompted with "certificates valid until 2027" in the same session as "audit svc-a"
    And the task "audit svc-a" ends complete with "svc-a is clean"
    And planner is woken once with the result of "audit svc-a"

  Scenario: the assignee cannot complete its task while a handoff is outstanding
    Given coder will reply "@reviewer please check the TLS certificates of svc-a"
    And reviewer will reply "certificates valid until 2027" after 1.5 seconds
    And coder will call zooid_complete_task with {"summary": "svc-a is clean"}
    And coder will call zooid_complete_task with {"summary": "svc-a is clean; certificates valid until 2027"}
    When ori says in "#ops": "@planner get svc-a looked at"
    And planner calls zooid_start_task_threads with {"tasks": [{"agent": "coder", "prompt": "audit svc-a"}]}
    And planner has started 1 task thread in "#ops"
    And reviewer is prompted with "please check the TLS certificates of svc-a"
    And ori replies in the thread of "audit svc-a": "@coder can you wrap up now?"
    Then coder got a result from zooid_complete_task
    And the result includes {"status": "refused", "reason": "handoff_outstanding"}
    And coder got a result from zooid_complete_task
    And the result includes {"status": "recorded"}
    And the task "audit svc-a" ends complete with "svc-a is clean; certificates valid until 2027"
    And planner is woken once with the result of "audit svc-a"

  Scenario: a result that arrives while the caller is mid-turn waits for that turn to end
    Given planner will take a turn that:
      | calls       | zooid_start_task_threads with {"tasks": [{"agent": "coder", "prompt": "audit svc-a"}]} |
      | waits until | released                                                                               |
      | says        | still planning the rest                                                                |
    And coder will reply "svc-a is clean"
    When ori says in "#ops": "@planner get svc-a looked at"
    Then planner got a result from zooid_start_task_threads
    And task 1 is started
    And the task "audit svc-a" ends complete with "svc-a is clean"
    When planner's turn is released
    Then planner is woken with the result of "audit svc-a" only after its turn ends with "still planning the rest"
    And planner is prompted with "svc-a is clean" in the same session as "get svc-a looked at"
    And planner is woken once with the result of "audit svc-a"

  Scenario: a caller whose thread was cleared gets the notice but is not woken
    Given coder will reply "svc-a is clean" after 1 second
    When ori says in "#ops": "@planner get svc-a looked at"
    And planner calls zooid_start_task_threads with {"tasks": [{"agent": "coder", "prompt": "audit svc-a"}]}
    And ori clears the thread
    Then the task "audit svc-a" ends complete with "svc-a is clean"
    And planner's thread gets a notice with the result of "audit svc-a"
    And planner is never woken with the result of "audit svc-a"

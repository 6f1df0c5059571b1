Feature: Working inside a task thread
  In order to finish a delegated task well
  As an assignee, a person watching it, or the agent that delegated it
  I want to steer, hand off and hear back without the task losing its way

  A bare human reply in a task thread goes to the assignee. An assignee that mentions
  another agent in its prose hands work to it: the callee runs in its own
  session of the thread, and its result wakes the assignee. The caller hears the
  task's result once, as a new turn of its original session, never in the middle of
  another turn, and not at all once its thread was cleared. A task still open after
  task_timeout (waiting on a person who never answers) closes timed_out, is reported
  once and frees its slot; a reply in its thread after that is an ordinary message.

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

  Scenario: tasks waiting on a person who never answers time out, are reported once and free their slots
    Given open tasks time out after 5 seconds
    And coder will reply "@ori which services are in scope?"
    And coder will reply "@ori which services are in scope?"
    And coder will reply "@ori which services are in scope?"
    And reviewer will reply "@ori which ports should I check?"
    And reviewer will reply "@ori which ports should I check?"
    And coder will take a turn that:
      | lists its tools |                                                                   |
      | calls           | zooid_complete_task with {"summary": "svc-a and svc-b are clean"} |
      | says            | svc-a and svc-b are clean                                         |
    When ori says in "#ops": "@planner get the services looked at"
    And planner calls zooid_start_task_threads with {"tasks": [{"agent": "coder", "prompt": "audit svc-a"}, {"agent": "coder", "prompt": "audit svc-b"}, {"agent": "coder", "prompt": "audit svc-c"}, {"agent": "reviewer", "prompt": "review svc-d"}, {"agent": "reviewer", "prompt": "review svc-e"}]}
    And planner calls zooid_start_task_threads with {"tasks": [{"agent": "reviewer", "prompt": "review svc-f"}], "notify": "none"}
    Then task 1 is refused (at_capacity)
    And planner has started 5 task threads in "#ops"
    And the task "audit svc-a" ends timed_out with "@ori which services are in scope?"
    And the task "audit svc-b" ends timed_out with "@ori which services are in scope?"
    And the task "audit svc-c" ends timed_out with "@ori which services are in scope?"
    And the task "review svc-d" ends timed_out with "@ori which ports should I check?"
    And the task "review svc-e" ends timed_out with "@ori which ports should I check?"
    And planner's thread gets a notice with the result of "audit svc-a"
    And planner's thread gets a notice with the result of "review svc-e"
    And planner is woken once per task, in the session that delegated it, in the order the tasks ended
    When planner calls zooid_start_task_threads with {"tasks": [{"agent": "reviewer", "prompt": "review svc-g"}], "notify": "none"}
    Then task 1 is started
    And reviewer is prompted with "review svc-g"
    When ori replies in the thread of "audit svc-a": "yes, svc-b too"
    Then coder is prompted with "yes, svc-b too" in the same session as "audit svc-a"
    And coder got a result from zooid_complete_task
    And the call is refused as an unknown tool
    And coder sees exactly the tools zooid_get_recent_threads, zooid_get_thread_history, zooid_get_history, zooid_get_members, zooid_get_room_info, zooid_get_rooms and zooid_send_message
    And coder posts "svc-a and svc-b are clean" in the thread of "audit svc-a"
    And the task "audit svc-a" ends timed_out with "@ori which services are in scope?"
    And planner is woken once with the result of "audit svc-a"

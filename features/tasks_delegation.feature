Feature: Delegating work to other agents in task threads
  In order to split a job across agents and hear back from each of them
  As an agent answering a request in a Matrix room
  I want to start task threads for other agents, and have each result come back to me as a new turn

  Each task is a new top-level message in the caller's room, posted as the caller and
  mentioning the assignee. Its thread is where the assignee works; when the assignee's
  turn ends the task is judged, its result is posted in the task thread, and (with
  notify caller, the default) the caller is told in its own thread and woken with it.

  Background:
    Given the homeserver has users "ori" and "mia"
    And agents "planner", "coder", "reviewer" and "tester" are bound to "#ops"

  Scenario: a fan-out of five tasks to three agents reports each result once, in the caller's original session
    Given coder will reply "svc-a is clean" after 0.4 seconds
    And coder will reply "svc-b is clean" after 1.2 seconds
    And reviewer will reply "svc-c has one open port" after 0.8 seconds
    And reviewer will reply "svc-d is clean" after 1.6 seconds
    And tester will reply "svc-e tests pass" after 0.1 seconds
    When ori says in "#ops": "@planner please get all five services checked"
    And planner calls zooid_start_task_threads with {"tasks": [{"agent": "coder", "prompt": "audit svc-a"}, {"agent": "coder", "prompt": "audit svc-b"}, {"agent": "reviewer", "prompt": "review svc-c"}, {"agent": "reviewer", "prompt": "review svc-d"}, {"agent": "tester", "prompt": "test svc-e"}]}
    Then tasks 1, 2, 3, 4 and 5 are started
    And the result includes {"notify": "caller"}
    And planner has started 5 task threads in "#ops"
    And planner is woken once per task, in the session that delegated it, in the order the tasks ended
    And planner is prompted with "svc-e tests pass" in the same session as "please get all five services checked"
    And coder is prompted once with the task "audit svc-a", under a header from planner
    And coder is prompted once with the task "audit svc-b", under a header from planner
    And reviewer is prompted once with the task "review svc-c", under a header from planner
    And reviewer is prompted once with the task "review svc-d", under a header from planner
    And tester is prompted once with the task "test svc-e", under a header from planner
    And the task "test svc-e" ends complete with "svc-e tests pass"
    And planner's thread gets a notice with the result of "audit svc-a"
    And planner's thread gets a notice with the result of "audit svc-b"
    And planner's thread gets a notice with the result of "review svc-c"
    And planner's thread gets a notice with the result of "review svc-d"
    And planner's thread gets a notice with the result of "test svc-e"

  Scenario: the assignee's first prompt says where it is, who delegated and how to finish
    When ori says in "#ops": "@planner please get svc-a audited"
    And planner calls zooid_start_task_threads with {"tasks": [{"agent": "coder", "prompt": "audit svc-a"}]}
    Then task 1 is started
    And coder's prompt with "audit svc-a" is exactly:
      """
      [zooid] room: {#ops:alias} ({#ops}) · thread: {$task:audit svc-a} · from: planner ({@planner})
      [zooid] Read more of this thread with zooid_get_thread_history {"thread_id": "{$task:audit svc-a}"}.

      [zooid task] planner ({@planner}) delegated this task to you; you are its assignee in this thread. Finish by calling zooid_complete_task with your result, or just end your turn: your last message becomes the result. You cannot start task threads here, but you can @mention another agent in this thread to hand work to it; its reply comes back to you.

      audit svc-a
      """

  Scenario: the caller's answer to each result is posted in its thread
    Given coder will reply "svc-a is clean" after 0.5 seconds
    And reviewer will reply "svc-c has one open port" after 1 second
    When ori says in "#ops": "@planner get svc-a and svc-c checked"
    And planner calls zooid_start_task_threads with {"tasks": [{"agent": "coder", "prompt": "audit svc-a"}, {"agent": "reviewer", "prompt": "review svc-c"}]}
    And planner will reply "noted: svc-a is clean"
    And planner will reply "noted: svc-c needs a firewall rule"
    Then planner posts "noted: svc-a is clean" in the thread of "get svc-a and svc-c checked"
    And planner posts "noted: svc-c needs a firewall rule" in the thread of "get svc-a and svc-c checked"

  Scenario: a room holds at most five open tasks; a closed one frees its slot
    Given coder will take a turn that:
      | waits until | released       |
      | says        | svc-a is clean |
    And coder will take a turn that:
      | waits until | released       |
      | says        | svc-b is clean |
    And reviewer will take a turn that:
      | waits until | released       |
      | says        | svc-c is clean |
    And reviewer will take a turn that:
      | waits until | released       |
      | says        | svc-d is clean |
    And tester will take a turn that:
      | waits until | released         |
      | says        | svc-e tests pass |
    When ori says in "#ops": "@planner please get all services checked"
    And planner calls zooid_start_task_threads with {"tasks": [{"agent": "coder", "prompt": "audit svc-a"}, {"agent": "coder", "prompt": "audit svc-b"}, {"agent": "reviewer", "prompt": "review svc-c"}, {"agent": "reviewer", "prompt": "review svc-d"}, {"agent": "tester", "prompt": "test svc-e"}], "notify": "none"}
    And planner calls zooid_start_task_threads with {"tasks": [{"agent": "tester", "prompt": "test svc-f"}], "notify": "none"}
    Then task 1 is refused (at_capacity)
    When tester's turn is released
    And the task "test svc-e" ends complete with "svc-e tests pass"
    And planner calls zooid_start_task_threads with {"tasks": [{"agent": "tester", "prompt": "test svc-g"}], "notify": "none"}
    Then task 1 is started
    And tester is prompted with "test svc-g"
    And tester is not prompted with "test svc-f"

  Scenario: with notify none the caller is never woken, and the task thread holds the result
    Given coder will reply "svc-a is clean"
    When ori says in "#ops": "@planner get svc-a looked at, no need to report back"
    And planner calls zooid_start_task_threads with {"tasks": [{"agent": "coder", "prompt": "audit svc-a"}], "notify": "none"}
    Then task 1 is started
    And the result includes {"notify": "none"}
    And the task "audit svc-a" ends complete with "svc-a is clean"
    And planner is never woken with the result of "audit svc-a"
    And no notice carries the result of "audit svc-a"

  Scenario: tasks for unknown agents, agents outside the room or the caller itself are refused, the others start
    Given agent "outsider" is bound to "#dev"
    When ori says in "#ops": "@planner get svc-a looked at"
    And planner calls zooid_start_task_threads with {"tasks": [{"agent": "ghost", "prompt": "audit svc-x"}, {"agent": "outsider", "prompt": "audit svc-y"}, {"agent": "coder", "prompt": "audit svc-a"}, {"agent": "planner", "prompt": "audit svc-z"}]}
    Then task 1 is refused (unknown_agent)
    And task 2 is refused (not_in_room)
    And task 3 is started
    And task 4 is refused (self)
    And planner has started 1 task thread in "#ops"
    And outsider is not prompted with "audit svc-y"

  Scenario: the caller is offered task threads and the assignee is offered completing its task
    Given planner will list its tools
    And coder will list its tools
    When ori says in "#ops": "@planner get svc-a looked at"
    Then planner sees exactly the tools zooid_get_recent_threads, zooid_get_thread_history, zooid_get_history, zooid_get_members, zooid_get_room_info, zooid_get_rooms, zooid_send_message, zooid_start_task_threads and zooid_handoff
    When planner calls zooid_start_task_threads with {"tasks": [{"agent": "coder", "prompt": "audit svc-a"}]}
    Then coder sees exactly the tools zooid_get_recent_threads, zooid_get_thread_history, zooid_get_history, zooid_get_members, zooid_get_room_info, zooid_get_rooms, zooid_send_message, zooid_complete_task and zooid_handoff

  Scenario: an assignee cannot delegate further: the tool is not there for it
    Given coder will take a turn that:
      | lists its tools |                                                                                            |
      | calls           | zooid_start_task_threads with {"tasks": [{"agent": "reviewer", "prompt": "audit svc-a for me"}]} |
    When ori says in "#ops": "@planner get svc-a looked at"
    And planner calls zooid_start_task_threads with {"tasks": [{"agent": "coder", "prompt": "audit svc-a"}]}
    Then coder got a result from zooid_start_task_threads
    And the call is refused as an unknown tool
    And coder does not see zooid_start_task_threads
    And reviewer is not prompted with "audit svc-a for me"

  Scenario: an agent handed work inside a task thread can neither delegate nor complete the task
    Given coder will reply "@reviewer please check the TLS certificates of svc-a"
    And reviewer will take a turn that:
      | lists its tools |                                                                                    |
      | calls           | zooid_start_task_threads with {"tasks": [{"agent": "tester", "prompt": "check the certificates"}]} |
    When ori says in "#ops": "@planner get svc-a looked at"
    And planner calls zooid_start_task_threads with {"tasks": [{"agent": "coder", "prompt": "audit svc-a"}]}
    Then reviewer sees exactly the tools zooid_get_recent_threads, zooid_get_thread_history, zooid_get_history, zooid_get_members, zooid_get_room_info, zooid_get_rooms and zooid_send_message
    And reviewer got a result from zooid_start_task_threads
    And the call is refused as an unknown tool
    And tester is not prompted with "check the certificates"

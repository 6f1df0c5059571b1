@several-daemons
Feature: Several daemons in one room
  In order to have agents from my laptop and from the CI box answer in the same room
  As a team running Zooid on more than one machine
  I want each daemon to answer for its own agents only, and every Zooid agent to be known as one

  Each daemon is a workstation with its own appservice registration on the homeserver. Its
  agents mark themselves as Zooid agents in their rooms (a dev.zooid.agent state event that
  only the agent itself may set); the room's admin lets members send it.

  Background:
    Given the homeserver has users "ori" and "mia"
    And the daemon under test is workstation "laptop"
    And agent "architect" is bound to "#ops"
    And a second daemon, workstation "ci", serves "builder" and "tester" in "#ops"
    And "#ops" lets its members mark themselves as Zooid agents

  Scenario: each daemon wakes only its own agents
    When ori says in "#ops": "@builder what broke the build?"
    Then builder is prompted with "what broke the build?"
    And architect is not prompted with "what broke the build?"
    When ori says in "#ops": "@architect is the plan still right?"
    Then architect is prompted with "is the plan still right?"
    And builder is not prompted with "is the plan still right?"

  Scenario: another daemon's agent is an agent, not a person: its task root wakes nobody here
    builder delegates to tester, both on the CI box: the task root is a top-level message in
    the room, which a person's would be for an agent with trigger any. It is the CI daemon's.
    Given agent "watcher" is bound to "#ops" with trigger any
    When builder calls zooid_start_task_threads with {"tasks": [{"agent": "tester", "prompt": "run the suite on main"}]}
    Then tester is prompted with "run the suite on main"
    And watcher is not prompted with "run the suite on main"
    And architect is not prompted with "run the suite on main"

  Scenario: every Zooid agent in the room is an agent to zooid_get_members, with its workstation
    When architect calls zooid_get_members
    Then the result includes:
      """json
      {"members": [
        {"id": "@architect", "is_agent": true, "agent_name": "architect", "workstation": "laptop"},
        {"id": "@builder", "is_agent": true, "agent_name": "builder", "workstation": "ci"},
        {"id": "@ori", "is_agent": false}
      ]}
      """
    When builder calls zooid_get_members
    Then the result includes {"members": [{"id": "@architect", "is_agent": true, "agent_name": "architect", "workstation": "laptop"}]}

  Scenario: two agents of one name are told apart by their workstation
    A bare name is each daemon's own agent; workstation.name picks one.
    Given a second daemon, workstation "ci", serves "ci-architect" in "#ops"
    And ci-architect is named "architect" in its daemon's zooid.yaml
    When ori says in "#ops" without m.mentions: "@ci.architect please review the plan"
    Then ci-architect is prompted with "please review the plan"
    And architect is not prompted with "please review the plan"
    When ori says in "#ops" without m.mentions: "@laptop.architect draft the plan"
    Then architect is prompted with "draft the plan"
    And ci-architect is not prompted with "draft the plan"

  Scenario: the daemon under test, killed and started again, still knows the other's agents
    Given agent "watcher" is bound to "#ops" with trigger any
    And the daemon runs as its own process
    When ori says in "#ops": "@architect are you there?"
    Then architect is prompted with "are you there?"
    When the daemon is killed and started again
    And builder calls zooid_start_task_threads with {"tasks": [{"agent": "tester", "prompt": "rerun the flaky job"}]}
    Then tester is prompted with "rerun the flaky job"
    And watcher is not prompted with "rerun the flaky job"
    When ori says in "#ops": "@architect are you back?"
    Then architect is prompted with "are you back?"

  Scenario: the second daemon, stopped and started again, answers for its agents
    When the second daemon is stopped and started again
    And ori says in "#ops": "@builder are you back?"
    Then builder is prompted with "are you back?"
    And architect is not prompted with "are you back?"
    When builder calls zooid_get_members
    Then the result includes {"members": [{"id": "@architect", "is_agent": true, "agent_name": "architect", "workstation": "laptop"}]}

  Scenario: an agent delegates to another daemon's agent through the room, and hears back once
    The task root is an ordinary message in the room: the CI daemon adopts it, runs it and posts
    the result in the task thread; the laptop's daemon tells architect.
    Given builder will reply "the suite is green on main"
    When architect calls zooid_start_task_threads with {"tasks": [{"agent": "ci.builder", "prompt": "run the suite on main"}]}
    Then the result includes {"results": [{"agent": "ci.builder", "status": "started"}]}
    And builder is prompted with "run the suite on main"
    And architect is prompted with "the suite is green on main"
    And architect is prompted once with "the suite is green on main"

  Scenario: the other daemon, stopped mid-task, reports the task interrupted, once
    Given builder will hang
    When architect calls zooid_start_task_threads with {"tasks": [{"agent": "ci.builder", "prompt": "bisect the failure"}]}
    Then builder is prompted with "bisect the failure"
    When the second daemon is stopped and started again
    Then architect is prompted with "interrupted_by_restart"
    And architect is prompted once with "interrupted_by_restart"

  Scenario: the caller's daemon, killed mid-task, still hears the result, once
    Given the daemon runs as its own process
    And builder will reply "bisected: commit abc broke it" after 3 seconds
    When architect calls zooid_start_task_threads with {"tasks": [{"agent": "ci.builder", "prompt": "bisect the failure"}]}
    Then builder is prompted with "bisect the failure"
    When the daemon is killed and started again
    Then architect is prompted with "bisected: commit abc broke it"
    And architect is prompted once with "bisected: commit abc broke it"

  Scenario: an agent of the other daemon delegates to one of this daemon's, and hears back once
    Given architect will reply "the plan holds"
    When builder calls zooid_start_task_threads with {"tasks": [{"agent": "laptop.architect", "prompt": "check the plan against the failure"}]}
    Then architect is prompted with "check the plan against the failure"
    And builder is prompted with "the plan holds"
    And builder is prompted once with "the plan holds"

  Scenario: the caller's daemon killed after posting the task root, before journaling it
    Given the daemon runs as its own process
    And builder will reply "bisected to commit abc"
    And the daemon will be killed at its fault point "task.root_posted"
    When ori says in "#ops": "@architect please find the culprit"
    And architect calls zooid_start_task_threads with {"tasks": [{"agent": "ci.builder", "prompt": "bisect the failure"}]}, and the daemon dies before answering
    Then the daemon dies at "task.root_posted" and is started again
    And builder is prompted once with "bisect the failure"
    And architect is prompted with "bisected to commit abc"
    And architect is prompted once with "bisected to commit abc"
    And the task "bisect the failure" has exactly one root in "#ops"

  Scenario: the assignee's daemon killed after posting the result, before journaling it
    Given the daemon runs as its own process
    And architect will reply "the plan holds"
    And the daemon will be killed at its fault point "task.result_posted"
    When builder calls zooid_start_task_threads with {"tasks": [{"agent": "laptop.architect", "prompt": "check the plan"}]}
    Then the daemon dies at "task.result_posted" and is started again
    And builder is prompted with "the plan holds"
    And builder is prompted once with "the plan holds"
    And architect is prompted once with "check the plan"

  Scenario: an agent hands off to another daemon's agent in its thread, and hears back once
    The handoff's notice mentions builder in architect's thread: the CI daemon adopts it and runs
    builder in its own session of the thread; when builder is done, its daemon posts the return
    in the thread as builder, and the laptop's daemon wakes architect with it.
    Given builder will reply "the suite is green on main"
    When ori says in "#ops": "@architect is main releasable?"
    And architect calls zooid_handoff with {"agent": "ci.builder", "prompt": "run the suite on main"}
    Then the result includes {"status": "started"}
    And builder is prompted with "run the suite on main" in a new session
    And architect gets the handoff return from ci.builder once, in the session that handed off: "the suite is green on main"
    And builder is prompted once with "run the suite on main"

  Scenario: an agent of the other daemon hands off to one of this daemon's, by its bare name, and hears back once
    architect is the only agent of that name in the room, so the CI box may call it so.
    Given architect will reply "the plan holds"
    When ori says in "#ops": "@builder why did the build break?"
    And builder calls zooid_handoff with {"agent": "architect", "prompt": "check the plan against the failure"}
    Then the result includes {"status": "started"}
    And architect is prompted with "check the plan against the failure" in a new session
    And builder gets the handoff return from laptop.architect once, in the session that handed off: "the plan holds"
    And architect is prompted once with "check the plan against the failure"

  Scenario: the callee's daemon, stopped mid-callee, returns the handoff interrupted, once
    Given builder will hang
    When ori says in "#ops": "@architect is main releasable?"
    And architect calls zooid_handoff with {"agent": "ci.builder", "prompt": "bisect the failure"}
    Then builder is prompted with "bisect the failure"
    When the second daemon is stopped and started again
    Then architect gets the handoff return from ci.builder once, in the session that handed off: "interrupted_by_restart"
    And builder is prompted once with "bisect the failure"

  Scenario: the caller's daemon, killed while the callee works, still hears the return, once
    Given the daemon runs as its own process
    And builder will reply "bisected: commit abc broke it" after 3 seconds
    When ori says in "#ops": "@architect is main releasable?"
    And architect calls zooid_handoff with {"agent": "ci.builder", "prompt": "bisect the failure"}
    Then builder is prompted with "bisect the failure"
    When the daemon is killed and started again
    Then architect gets the handoff return from ci.builder once: "bisected: commit abc broke it"
    And builder is prompted once with "bisect the failure"

  Scenario: the caller's daemon killed after posting the handoff, before journaling it
    Given the daemon runs as its own process
    And builder will reply "bisected to commit abc"
    And the daemon will be killed at its fault point "handoff.posted"
    When ori says in "#ops": "@architect is main releasable?"
    And architect calls zooid_handoff with {"agent": "ci.builder", "prompt": "bisect the failure"}, and the daemon dies before answering
    Then the daemon dies at "handoff.posted" and is started again
    And builder is prompted once with "bisect the failure"
    And architect gets the handoff return from ci.builder once: "bisected to commit abc"

  Scenario: the callee's daemon killed after posting the return, before journaling it
    Its restart posts the return again with the same transaction id: one return in the thread,
    and builder is woken once.
    Given the daemon runs as its own process
    And architect will reply "the plan holds"
    And the daemon will be killed at its fault point "handoff.return_posted"
    When ori says in "#ops": "@builder why did the build break?"
    And builder calls zooid_handoff with {"agent": "laptop.architect", "prompt": "check the plan"}
    Then the result includes {"status": "started"}
    And the daemon dies at "handoff.return_posted" and is started again
    And builder gets the handoff return from laptop.architect once: "the plan holds"
    And builder's thread has exactly one handoff return from architect
    And architect is prompted once with "check the plan"

  Scenario: the assignee's daemon killed on receiving another daemon's task, before journaling it
    Nothing is journaled yet, and the sync position is not saved past the root: the restart
    meets the root again, adopts it then and runs it, and the caller hears the result once.
    Given the daemon runs as its own process
    And architect will reply "the plan holds"
    And the daemon will be killed at its fault point "task.adopting"
    When builder calls zooid_start_task_threads with {"tasks": [{"agent": "laptop.architect", "prompt": "check the plan"}]}
    Then the daemon dies at "task.adopting" and is started again
    And builder is prompted with "the plan holds"
    And builder is prompted once with "the plan holds"
    And architect is prompted once with "check the plan"

  Scenario: the assignee's daemon killed after adopting another daemon's task, before waking its agent
    A daemon that restarts closes the open tasks it runs as interrupted, as for a task of its own:
    the caller hears so once, and the assignee is not woken for a task already reported.
    Given the daemon runs as its own process
    And architect will reply "the plan holds"
    And the daemon will be killed at its fault point "task.adopted"
    When builder calls zooid_start_task_threads with {"tasks": [{"agent": "laptop.architect", "prompt": "check the plan"}]}
    Then the daemon dies at "task.adopted" and is started again
    And builder is prompted with "ended: cancelled (interrupted_by_restart)"
    And builder is prompted once with "ended: cancelled (interrupted_by_restart)"
    And architect is not prompted with "check the plan"

  Scenario: the callee's daemon killed on receiving another daemon's handoff, before journaling it
    The restart meets the notice again, adopts it then and runs the callee: one return in the
    thread and builder is woken once.
    Given the daemon runs as its own process
    And architect will reply "the plan holds"
    And the daemon will be killed at its fault point "handoff.adopting"
    When ori says in "#ops": "@builder why did the build break?"
    And builder calls zooid_handoff with {"agent": "laptop.architect", "prompt": "check the plan"}
    Then the result includes {"status": "started"}
    And the daemon dies at "handoff.adopting" and is started again
    And builder gets the handoff return from laptop.architect once: "the plan holds"
    And builder's thread has exactly one handoff return from architect
    And architect is prompted once with "check the plan"

  Scenario: the callee's daemon killed after adopting another daemon's handoff, before starting its agent
    As for a handoff cut short by a restart: the caller hears once that it was interrupted.
    Given the daemon runs as its own process
    And architect will reply "the plan holds"
    And the daemon will be killed at its fault point "handoff.adopted"
    When ori says in "#ops": "@builder why did the build break?"
    And builder calls zooid_handoff with {"agent": "laptop.architect", "prompt": "check the plan"}
    Then the result includes {"status": "started"}
    And the daemon dies at "handoff.adopted" and is started again
    And builder gets the handoff return from laptop.architect once: "interrupted_by_restart"
    And builder's thread has exactly one handoff return from architect
    And architect is not prompted with "check the plan"

  Scenario: a handoff whose callee's daemon never comes back returns timed_out at task_timeout, once
    The wait for another daemon's return is bounded by the task timeout, counted from the
    handoff: the caller hears once that it timed out, a restart does not tell it again, and it
    may hand off again (the handoff is no longer already_open).
    Given open tasks time out after 3 seconds
    And the daemon runs as its own process
    And builder will hang
    When ori says in "#ops": "@architect is main releasable?"
    And architect calls zooid_handoff with {"agent": "ci.builder", "prompt": "bisect the failure"}
    Then the result includes {"status": "started"}
    And builder is prompted with "bisect the failure"
    When the second daemon is stopped for good
    Then architect gets the handoff return from ci.builder once, in the session that handed off: "no return came within the task timeout, so the handoff is over (timed_out)"
    When the daemon is killed and started again
    Then architect gets the handoff return from ci.builder once: "(timed_out)"
    When architect calls zooid_handoff with {"agent": "ci.builder", "prompt": "bisect it again"}
    Then the result includes {"status": "started"}

  Scenario: a return that comes after its handoff timed out is not delivered
    Given open tasks time out after 2 seconds
    And builder will reply "bisected: commit abc broke it" after 5 seconds
    When ori says in "#ops": "@architect is main releasable?"
    And architect calls zooid_handoff with {"agent": "ci.builder", "prompt": "bisect the failure"}
    Then the result includes {"status": "started"}
    And architect gets the handoff return from ci.builder once, in the session that handed off: "(timed_out)"
    And architect's thread gets a handoff return from builder
    And architect gets the handoff return from ci.builder once: "(timed_out)"
    And architect is not prompted with "bisected: commit abc broke it"

  Scenario: a callee of another daemon that @mentions its caller answers through the return, once
    An agent's prose wakes no agent of another daemon: the mention is words the caller reads
    in the return, not a second wake.
    Given the daemon keeps a trace
    And builder will reply "@laptop.architect which branch do you mean?"
    When ori says in "#ops": "@architect is main releasable?"
    And architect calls zooid_handoff with {"agent": "ci.builder", "prompt": "bisect the failure"}
    Then builder is prompted with "bisect the failure"
    And architect gets the handoff return from ci.builder once, in the session that handed off: "which branch do you mean?"
    And architect is prompted once with "which branch do you mean?"
    And the trace of "#ops" shows "which branch do you mean?" waking nobody (agent_post)

  Scenario: a callee of another daemon that @mentions an agent of the caller's daemon hands nothing on
    Unlike a mention of one of its own daemon's agents, it wakes nobody there, and the callee
    is done when its turn ends: the caller hears the return without waiting on the mentioned
    agent.
    Given agent "reviewer" is bound to "#ops"
    And the daemon keeps a trace
    And builder will reply "@laptop.reviewer please confirm the certificate chain"
    When ori says in "#ops": "@architect is main releasable?"
    And architect calls zooid_handoff with {"agent": "ci.builder", "prompt": "bisect the failure"}
    Then builder is prompted with "bisect the failure"
    And architect gets the handoff return from ci.builder once, in the session that handed off: "please confirm the certificate chain"
    And the trace of "#ops" shows "please confirm the certificate chain" waking nobody (agent_post)
    And reviewer is not prompted with "please confirm the certificate chain"

  Scenario: a task of the other daemon for its own agent is not taken by an agent of that name here
    Given agent "lab-tester" is bound to "#ops"
    And lab-tester is named "tester" in its daemon's zooid.yaml
    When builder calls zooid_start_task_threads with {"tasks": [{"agent": "tester", "prompt": "run the flaky job"}]}
    Then tester is prompted with "run the flaky job"
    And lab-tester is not prompted with "run the flaky job"

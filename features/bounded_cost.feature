@routing
Feature: One busy room cannot exhaust the host
  In order to keep a chatty room from starting an agent process per thread
  As the operator of a Zooid daemon
  I want live agent processes capped per agent and per daemon, the least recently used idle one
  stopped to make room, and turns that must wait served in arrival order and told so

  Background:
    Given the homeserver has users "ori" and "mia"
    And agents "agent-a" and "agent-b" are bound to "#ops"

  Scenario: thirty threads on at most three processes, each answered once
    Given agent-a runs at most 3 processes
    And a turn waiting for an agent process is announced after 600 seconds
    And agent-a will take a turn that:
      | waits until | released |
      | says        | ok       |
    And agent-a will take a turn that:
      | waits until | released |
      | says        | ok       |
    And agent-a will take a turn that:
      | waits until | released |
      | says        | ok       |
    When ori mentions agent-a in 30 new threads of "#ops"
    And agent-a has been prompted 3 times
    And agent-a's turn is released
    Then each of those threads gets exactly one "ok" from agent-a
    And agent-a's live processes peaked at 3

  Scenario: turns waiting for a process are told so, then answered in the order they arrived
    Given agent-a runs at most 1 process
    And a turn waiting for an agent process is announced after 1 second
    And agent-a will take a turn that:
      | waits until | released    |
      | says        | svc-a is up |
    When ori says in "#ops": "@agent-a how is svc-a?"
    And agent-a is prompted with "how is svc-a?"
    And mia mentions agent-a in 4 new threads of "#ops"
    Then each of those threads gets "agent-a is busy in other threads (max_processes: 1). This message is queued and will be answered in turn." from agent-a
    When agent-a's turn is released
    Then each of those threads gets exactly one "ok" from agent-a
    And each of those threads gets exactly one "agent-a is busy in other threads (max_processes: 1). This message is queued and will be answered in turn." from agent-a
    And agent-a was prompted in those threads in the order they were started
    And agent-a posts "svc-a is up" in the thread of "how is svc-a?"
    And agent-a's live processes peaked at 1

  Scenario: the least recently used idle process is stopped to make room, and its thread still works
    Given agent-a runs at most 2 processes
    And agent-a will reply "svc-a is up"
    And agent-a will reply "svc-b is up"
    And agent-a will reply "svc-a still up"
    And agent-a will reply "svc-c is up"
    And agent-a will reply "svc-b still up"
    When ori says in "#ops": "@agent-a how is svc-a?"
    Then the thread of "how is svc-a?" gets "svc-a is up" from agent-a
    When mia says in "#ops": "@agent-a how is svc-b?"
    Then the thread of "how is svc-b?" gets "svc-b is up" from agent-a
    When ori replies in the thread of "how is svc-a?": "@agent-a and now?"
    Then the thread of "how is svc-a?" gets "svc-a still up" from agent-a
    When mia says in "#ops": "@agent-a how is svc-c?"
    Then the thread of "how is svc-c?" gets "svc-c is up" from agent-a
    And agent-a's process in the thread of "how is svc-b?" has stopped
    And agent-a's process in the thread of "how is svc-a?" is still running
    When mia replies in the thread of "how is svc-b?": "@agent-a and svc-b now?"
    Then agent-a is prompted with "and svc-b now?" in a new session
    And agent-a posts "svc-b still up" in the thread of "how is svc-b?"
    And agent-a's live processes peaked at 2

  Scenario: the daemon's cap holds across agents, and a wait for it is said in the thread
    Given the daemon runs at most 2 agent processes
    And a turn waiting for an agent process is announced after 1 second
    And agent-a will take a turn that:
      | waits until | released |
      | says        | done     |
    And agent-a will take a turn that:
      | waits until | released |
      | says        | done     |
    And agent-b will reply "svc-c is up"
    When ori says in "#ops": "@agent-a audit svc-a"
    And mia says in "#ops": "@agent-a audit svc-b"
    And agent-a has been prompted 2 times
    And ori says in "#ops": "@agent-b audit svc-c"
    Then the thread of "audit svc-c" gets "agent-b is waiting for an agent process: all 2 this daemon runs are busy (max_processes: 2). This message is queued and will be answered in turn." from agent-b
    When agent-a's turn is released
    Then agent-b posts "svc-c is up" in the thread of "audit svc-c"
    And the thread of "audit svc-a" gets "done" from agent-a
    And the thread of "audit svc-b" gets "done" from agent-a
    And the agents' live processes peaked at 2 together

  Scenario: threads share a process when the agent hosts several sessions per process
    Given agent-a hosts up to 10 sessions per process
    When ori mentions agent-a in 12 new threads of "#ops"
    Then each of those threads gets exactly one "ok" from agent-a
    And agent-a's live processes peaked at 2

  Scenario: sessions_per_process auto shares a process only when the agent can close sessions
    Given agent-a hosts as many sessions per process as it can
    And agent-a can close sessions
    And agent-b hosts as many sessions per process as it can
    And agent-b runs at most 2 processes
    When ori mentions agent-a in 6 new threads of "#ops"
    Then each of those threads gets exactly one "ok" from agent-a
    And agent-a's live processes peaked at 1
    When mia mentions agent-b in 2 new threads of "#ops"
    Then each of those threads gets exactly one "ok" from agent-b
    And agent-b's live processes peaked at 2

  Scenario: a thread idle on a shared process has its session closed in the agent, and the process goes on
    Given agent-a hosts as many sessions per process as it can
    And agent-a can close sessions
    And agent processes stop after 1 second idle
    And agent-a will take a turn that:
      | waits until | released    |
      | says        | svc-b is up |
    And agent-a will reply "svc-a is up"
    When mia says in "#ops": "@agent-a how is svc-b?"
    Then agent-a is prompted with "how is svc-b?"
    When ori says in "#ops": "@agent-a how is svc-a?"
    Then the thread of "how is svc-a?" gets "svc-a is up" from agent-a
    And agent-a answered the threads of "how is svc-a?" and "how is svc-b?" in one process
    And agent-a is told to close the session of the thread of "how is svc-a?"
    And agent-a's process in the thread of "how is svc-b?" is still running
    When agent-a's turn is released
    Then the thread of "how is svc-b?" gets "svc-b is up" from agent-a

  Scenario: a crash stops a shared process, and every thread on it starts afresh
    Given agent-a hosts up to 10 sessions per process
    And agent-a will reply "svc-a is up"
    And agent-a will reply "svc-b is up"
    And agent-a will crash
    When ori says in "#ops": "@agent-a how is svc-a?"
    Then the thread of "how is svc-a?" gets "svc-a is up" from agent-a
    When mia says in "#ops": "@agent-a how is svc-b?"
    Then the thread of "how is svc-b?" gets "svc-b is up" from agent-a
    And agent-a answered the threads of "how is svc-a?" and "how is svc-b?" in one process
    When ori replies in the thread of "how is svc-a?": "@agent-a restart it"
    Then agent-a posts an error "agent_crashed" in the thread
    When mia replies in the thread of "how is svc-b?": "@agent-a and svc-b now?"
    Then agent-a is prompted with "and svc-b now?" in a new session

  Scenario: HTTP sessions count against the agent's cap and wait their turn
    Given agent "hook" is bound to HTTP
    And hook runs at most 2 processes
    And hook will take a turn that:
      | waits until | released |
      | says        | ok       |
    And hook will take a turn that:
      | waits until | released |
      | says        | ok       |
    When hook is asked over HTTP 8 times at once: "how is the build?"
    And hook has been prompted 2 times
    And hook's turn is released
    Then every HTTP answer streams "ok" and ends with end_turn
    And hook's live processes peaked at 2

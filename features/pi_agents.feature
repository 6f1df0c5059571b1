@pi
Feature: pi agents, for real
  In order to put pi into a room as one of its agents
  As an operator who sets acp.preset to pi
  I want pi to read and post with the Zooid tools, and to take and finish delegated tasks

  pi-acp passes the MCP server of session/new to no one: the daemon installs its pi extension,
  which gives pi the same tools against the same socket. These scenarios run the real pi-acp
  and pi pinned in zooid/piext/testdata/pi, started by the daemon from the pi preset; only the
  model is scripted: a model double answers each of pi's model requests with the next step of
  the agent's script. CI's pass on real Synapse leaves these to the fake homeserver (as it does
  real_agents.feature's scenarios but for those tagged @smoke, pi's first turn among them).

  Background:
    Given the homeserver has users "ori"
    And agents "scout" and "worker" are bound to "#ops"
    And scout and worker run real pi

  Scenario: a pi agent reads the room and posts into it with the Zooid tools
    Given ori says in "#ops": "the svc-a deploy failed at 02:00"
    And scout's model will call zooid_send_message with {"room": "#ops", "text": "heads-up: looking into svc-a"}
    And scout's model will call zooid_get_recent_threads with {"limit": 5}
    And scout's model will say "recent threads: {result}"
    When ori says in "#ops": "@scout what happened tonight?"
    Then scout posts "heads-up: looking into svc-a" top-level in "#ops"
    And scout posts a notice containing "the svc-a deploy failed at 02:00" in the thread

  Scenario: a pi agent delegates a task, another pi agent completes it with zooid_complete_task
    Given scout's model will call zooid_start_task_threads with {"tasks": [{"agent": "worker", "prompt": "check the svc-a logs"}]}
    And scout's model will say "asked worker"
    And worker's model will call zooid_complete_task with {"summary": "svc-a: disk full on db-2"}
    And worker's model will say "done"
    And scout's model will say "worker reports: {prompt}"
    When ori says in "#ops": "@scout why did svc-a fail?"
    Then scout has started a task for worker: "check the svc-a logs"
    And the task "check the svc-a logs" ends complete with "svc-a: disk full on db-2"
    And scout's thread gets a notice with the result of "check the svc-a logs"
    And scout posts a notice containing "svc-a: disk full on db-2" in the thread

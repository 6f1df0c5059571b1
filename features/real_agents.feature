@real-agents
Feature: Real agents take real turns
  In order to put a coding agent into a room with nothing configured but its preset
  As an operator with the default zooid.yaml
  I want the agent's real adapter to find the Zooid tools, call them and answer with what they said

  These scenarios start each preset's real adapter (zooid/daemon/testdata/adapters; pi and
  pi-acp from zooid/piext/testdata/pi) from the preset, under the default permission policy (deny). Only the model is scripted: a model double
  on loopback answers each of the agent's model requests with the next step of its script, and
  records what the agent sent it: the tools it offered, the tool results it passed back.
  Claude Code and gemini-cli ask their client before every MCP tool call; the daemon grants
  those for its own tools, and only those. pi has no use for the MCP server in session/new: it
  gets the same tools through the extension the daemon installs in its pi directory.

  What most of these show lies on the agent's side of the daemon (its adapter, its model API,
  its permission prompts), which a real homeserver does not change, and each costs seconds of
  CPU to start a real agent: CI's pass on real Synapse runs only those tagged @smoke, each
  preset's first turn; every one of them runs on the fake homeserver in README's test command.

  Background:
    Given the homeserver has users "ori"

  @smoke
  Scenario Outline: <preset> calls a Zooid tool with no permission prompt, and answers with its result
    Given agent "bot" is bound to "#ops"
    And bot runs real <preset>
    And bot's model will call zooid_get_room_info
    And bot's model will say "this room: {result}"
    When ori says in "#ops": "@bot what room is this?"
    Then bot's model read the result of zooid_get_room_info: {"id": "#ops", "transport": "matrix"}
    And bot posts a notice containing "transport" in the thread
    And bot's model is offered the Zooid tools zooid_get_recent_threads, zooid_get_thread_history, zooid_get_history, zooid_get_members, zooid_get_room_info, zooid_get_rooms, zooid_send_message, zooid_start_task_threads and zooid_handoff
    And bot is prompted once with "what room is this?"

    Examples:
      | preset   |
      | claude   |
      | gemini   |
      | codex    |
      | opencode |
      | pi       |

  Scenario: under permission deny, a shell command is refused in the same turn that a Zooid call goes through
    Given agent "claude1" is bound to "#ops"
    And claude1 runs real claude
    And claude1's model will call Bash with {"command": "touch pwned.txt", "description": "make a file"}
    And claude1's model will call zooid_get_members
    And claude1's model will say "done"
    When ori says in "#ops": "@claude1 who is here?"
    Then claude1's model read an error from Bash containing "refused permission"
    And claude1 posts a notice containing "asked for permission to run" in the thread
    And claude1's model read the result of zooid_get_members: {}
    And claude1 posts a notice containing "done" in the thread
    And claude1's working directory has no file "pwned.txt"

  Scenario Outline: <caller> delegates a task, and <assignee> completes it with zooid_complete_task
    Given agents "lead" and "worker" are bound to "#ops"
    And lead runs real <caller>
    And worker runs real <assignee>
    And lead's model will call zooid_start_task_threads with {"tasks": [{"agent": "worker", "prompt": "check the svc-a logs"}]}
    And lead's model will say "asked worker"
    And worker's model will call zooid_complete_task with {"summary": "svc-a: disk full on db-2"}
    And worker's model will say "done"
    And lead's model will say "worker reports: {prompt}"
    When ori says in "#ops": "@lead why did svc-a fail?"
    Then lead has started a task for worker: "check the svc-a logs"
    And worker's model is offered the Zooid tools zooid_get_recent_threads, zooid_get_thread_history, zooid_get_history, zooid_get_members, zooid_get_room_info, zooid_get_rooms, zooid_send_message, zooid_complete_task and zooid_handoff
    And the task "check the svc-a logs" ends complete with "svc-a: disk full on db-2"
    And lead's thread gets a notice with the result of "check the svc-a logs"
    And lead posts a notice containing "svc-a: disk full on db-2" in the thread
    And lead is woken once with the result of "check the svc-a logs"
    And worker is not prompted with "why did svc-a fail?"

    Examples:
      | caller   | assignee |
      | claude   | gemini   |
      | gemini   | codex    |
      | codex    | opencode |
      | opencode | pi       |
      | pi       | claude   |

  Scenario Outline: <preset> rides out a rate limit and a server error from its model API
    Given agent "bot" is bound to "#ops"
    And bot runs real <preset>
    And bot's model will fail with HTTP 429 and Retry-After 1
    And bot's model will call zooid_get_room_info
    And bot's model will fail with HTTP 500
    And bot's model will say "this room: {result}"
    When ori says in "#ops": "@bot what room is this?"
    Then bot's model read the result of zooid_get_room_info: {"id": "#ops", "transport": "matrix"}
    And bot posts a notice containing "transport" in the thread

    Examples:
      | preset |
      | claude |
      | gemini |
      | pi     |

  Scenario Outline: <preset> picks its thread up after a daemon restart, told to catch up, and catches up
    Given agent "bot" is bound to "#ops"
    And bot runs real <preset>
    And the daemon runs as its own process
    And bot's model will say "svc-b is degraded"
    When ori says in "#ops": "@bot how is svc-b?"
    Then bot posts a notice containing "svc-b is degraded" in the thread
    When the daemon is killed and started again
    And bot's model will call zooid_get_thread_history with {"thread_id": "$thread"}
    And bot's model will say "caught up: {result}"
    And ori replies in the thread: "can you restart it?"
    Then bot's model is prompted with "catch up with zooid_get_thread_history"
    And bot's model read the result of zooid_get_thread_history: {"has_more": false}
    And bot posts a notice containing "how is svc-b?" in the thread

    Examples:
      | preset   |
      | claude   |
      | gemini   |
      | codex    |
      | opencode |
      | pi       |

  Scenario Outline: <preset>'s model reads a refused call and recovers
    Given agent "bot" is bound to "#ops"
    And bot runs real <preset>
    And bot's model will call zooid_get_thread_history with {"thread_id": "not-an-event-id"}
    And bot's model will call zooid_get_room_info
    And bot's model will say "recovered: {result}"
    When ori says in "#ops": "@bot what is this room?"
    Then bot's model read an error from zooid_get_thread_history containing "invalid_argument: thread_id"
    And bot's model read the result of zooid_get_room_info: {"id": "#ops", "transport": "matrix"}
    And bot posts a notice containing "recovered:" in the thread

    Examples:
      | preset   |
      | claude   |
      | gemini   |
      | codex    |
      | opencode |
      | pi       |

@mcp @recorded
Feature: Reading a room replayed from a recorded incident
  In order to reproduce what an agent saw in a real room
  As a maintainer with a recording of that room
  I want the replayed room to read back exactly as recorded: threads, order, edits

  Background:
    Given the homeserver has users "ori" and "mia"
    And agents "agent-a" and "agent-b" are bound to "#ops"
    And "#ops" is replayed from the recorded scenario "svc-a-incident"

  Scenario: the overview lists the recorded threads newest first, with the edited status
    When ori says in "#ops": "@agent-a what happened to svc-a this morning?"
    And agent-a calls zooid_get_recent_threads with {"limit": 10}
    Then the result has 6 threads
    And the threads are the recorded top-level messages of "#ops", newest first
    And no thread in the result is a thread reply
    And the result includes {"threads": [{"text": "status page updated: svc-a degraded 09:02–09:14, mitigated by rollback", "reply_count": 0}]}
    And has_more is false

  Scenario: the alarm thread reads back root first, agents' notices included
    Given agent-a is answering a mention in "#ops"
    When agent-a reads the recorded thread "svc-a-p99-latency" of "#ops"
    Then the result has 5 messages
    And the messages are the recorded thread "svc-a-p99-latency" of "#ops", root first
    And the result includes {"messages": [{"sender": "@agent-a", "is_agent": true, "agent_name": "agent-a", "text": "Confirmed: pool_max went from 64 to 16 in config/svc-a.yaml line 41."}]}

  Scenario: an edited thread reply shows its new text and the edit is no message of its own
    Given agent-b is answering a mention in "#ops"
    When agent-b reads the recorded thread "postmortem-doc-for" of "#ops"
    Then the messages are the recorded thread "postmortem-doc-for" of "#ops", root first
    And the result includes {"messages": [{"text": "Draft timeline: 09:02 alarm, 09:06 cause found, 09:08 rollback, 09:14 healthy."}]}

  Scenario: the full history is the recording in order, reactions and edits left out
    Given agent-a is answering a mention in "#ops"
    When agent-a calls zooid_get_history with {"limit": 200}
    Then the messages hold the recorded history of "#ops" in order
    And the messages are oldest first
    And each reply in the result carries its thread_id and no top-level message does

  Scenario: a recording with rich replies is sent message by message and reads back alike
    Given agent "agent-a" is bound to "#dev"
    And "#dev" is replayed from the recorded scenario "deploy-review"
    And ori says in "#dev": "@agent-a is the svc-b plan settled?"
    When agent-a reads the recorded thread "plan" of "#dev"
    Then the messages are the recorded thread "plan" of "#dev", root first
    And the result has 4 messages

  Scenario: the replayed room records back as the recording it came from, read as an agent's appservice user
    When "#ops" is recorded as agent-a
    Then the recording is the recorded scenario "svc-a-incident" again

  Scenario: a recording with rich replies records back with its replies
    Given agent "agent-a" is bound to "#dev"
    And "#dev" is replayed from the recorded scenario "deploy-review"
    When "#dev" is recorded as agent-a
    Then the recording is the recorded scenario "deploy-review" again

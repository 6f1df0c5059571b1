Feature: Handing work to another agent in the thread
  In order to involve a colleague without leaving the conversation
  As an agent answering a thread
  I want to hand a piece of work to one other agent here and hear back once, when it is really done

  zooid_handoff {agent, prompt} is the only way to involve another agent in this thread. The
  daemon posts the prompt in the thread as the caller, an m.notice mentioning the callee and
  marked dev.zooid.handoff, and runs the callee in its own session of the thread. The caller
  ends its turn; when the callee is really done (its turn ended, nothing more queued for it, and
  no agent it handed to or @mentioned still working), the caller is woken once, in its own
  session, with "[handoff return] from <agent>" and the callee's final message. Refusals are
  results the model reads: already_open, self, unknown_agent, not_in_room. The handoff is
  journaled with the tasks, so its return is delivered exactly once across daemon restarts.

  Background:
    Given the homeserver has users "ori" and "mia"
    And agents "planner", "coder" and "reviewer" are bound to "#ops"

  Scenario: a handoff runs the callee in the thread and its answer comes back to the caller
    Given the daemon keeps a trace
    And coder will reply "certificates valid until 2027"
    When ori says in "#ops": "@planner is svc-a ready for the audit?"
    And planner calls zooid_handoff with {"agent": "coder", "prompt": "check the TLS certificates of svc-a"}
    Then the result includes {"status": "started"}
    And planner's thread has exactly one handoff to coder: "check the TLS certificates of svc-a"
    And coder is prompted with "check the TLS certificates of svc-a" in a new session
    And coder posts "certificates valid until 2027" in the thread
    And planner gets the handoff return from coder once, in the session that handed off: "certificates valid until 2027"
    And the trace of "#ops" records planner's handoff to coder started
    And the trace of "#ops" records planner's handoff to coder returned
    And the trace of "#ops" records planner's handoff to coder woken

  Scenario: a callee that ends without a word is returned as such
    Given coder will take a turn that:
      | calls | zooid_get_room_info |
    When ori says in "#ops": "@planner is svc-a ready for the audit?"
    And planner calls zooid_handoff with {"agent": "coder", "prompt": "look at svc-a quietly"}
    Then the result includes {"status": "started"}
    And coder got a result from zooid_get_room_info
    And planner gets the handoff return from coder once, in the session that handed off: "it ended its turn without a reply"

  Scenario: a callee that crashes is returned as failed, not as an answer
    Given coder will crash
    When ori says in "#ops": "@planner is svc-a ready for the audit?"
    And planner calls zooid_handoff with {"agent": "coder", "prompt": "check the TLS certificates of svc-a"}
    Then the result includes {"status": "started"}
    And planner gets the handoff return from coder once, in the session that handed off: "its turn failed (agent_error)"

  Scenario: a handoff to oneself, to an unknown agent or to an agent outside the room is refused
    Given agent "scout" is bound to "#dev"
    When ori says in "#ops": "@planner is svc-a ready for the audit?"
    And planner calls zooid_handoff with {"agent": "planner", "prompt": "check it yourself"}
    Then the result includes {"status": "refused", "reason": "self"}
    When planner calls zooid_handoff with {"agent": "nobody", "prompt": "check it"}
    Then the result includes {"status": "refused", "reason": "unknown_agent"}
    When planner calls zooid_handoff with {"agent": "scout", "prompt": "check it"}
    Then the result includes {"status": "refused", "reason": "not_in_room"}
    And scout is not prompted with "check it"
    And planner has posted nothing containing "check it"

  Scenario: while a handoff is outstanding the caller cannot start another
    Given coder will take a turn that:
      | waits until | released                      |
      | says        | certificates valid until 2027 |
    When ori says in "#ops": "@planner is svc-a ready for the audit?"
    And planner calls zooid_handoff with {"agent": "coder", "prompt": "check the TLS certificates of svc-a"}
    Then the result includes {"status": "started"}
    When planner calls zooid_handoff with {"agent": "reviewer", "prompt": "review the svc-a config"}
    Then the result includes {"status": "refused", "reason": "already_open"}
    And reviewer is not prompted with "review the svc-a config"
    When coder's turn is released
    Then planner gets the handoff return from coder once, in the session that handed off: "certificates valid until 2027"

  Scenario: a callee still running tools is not done
    Given coder will take a turn that:
      | says        | checking the certificates now |
      | calls       | zooid_get_room_info           |
      | waits until | released                      |
      | says        | certificates valid until 2027 |
    When ori says in "#ops": "@planner is svc-a ready for the audit?"
    And planner calls zooid_handoff with {"agent": "coder", "prompt": "check the TLS certificates of svc-a"}
    Then coder posts "checking the certificates now" in the thread
    And coder got a result from zooid_get_room_info
    And planner is not prompted with "[handoff return]"
    When coder's turn is released
    Then planner gets the handoff return from coder only after coder's turn ends with "certificates valid until 2027"
    And planner gets the handoff return from coder once, in the session that handed off: "certificates valid until 2027"

  Scenario: a callee that mentions another agent is done only when that one is
    Given coder will reply "@reviewer please confirm the svc-a certificate chain"
    And reviewer will reply "chain confirmed"
    And coder will reply "certificates valid until 2027, chain confirmed"
    When ori says in "#ops": "@planner is svc-a ready for the audit?"
    And planner calls zooid_handoff with {"agent": "coder", "prompt": "check the TLS certificates of svc-a"}
    Then reviewer is prompted with "please confirm the svc-a certificate chain"
    And coder is prompted with "[handoff return] from reviewer"
    And planner gets the handoff return from coder once, in the session that handed off: "certificates valid until 2027, chain confirmed"
    And planner is not prompted with "please confirm the svc-a certificate chain"

  Scenario: a person mentioning the caller meanwhile does not cancel the pending return
    Given coder will take a turn that:
      | waits until | released                      |
      | says        | certificates valid until 2027 |
    When ori says in "#ops": "@planner is svc-a ready for the audit?"
    And planner calls zooid_handoff with {"agent": "coder", "prompt": "check the TLS certificates of svc-a"}
    And coder is prompted with "check the TLS certificates of svc-a"
    And planner will reply "still waiting on coder"
    And mia replies in the thread: "@planner any news?"
    Then planner is prompted with "any news?" in the same session as "is svc-a ready for the audit?"
    And planner posts "still waiting on coder" in the thread
    When coder's turn is released
    Then planner gets the handoff return from coder once, in the session that handed off: "certificates valid until 2027"

  Scenario: the daemon killed while the callee works returns the handoff once, interrupted
    Given the daemon runs as its own process
    And coder will hang
    When ori says in "#ops": "@planner is svc-a ready for the audit?"
    And planner calls zooid_handoff with {"agent": "coder", "prompt": "check the TLS certificates of svc-a"}
    Then the result includes {"status": "started"}
    And coder is prompted with "check the TLS certificates of svc-a"
    When the daemon is killed and started again
    Then planner gets the handoff return from coder once: "interrupted_by_restart"
    When the daemon is killed and started again
    Then planner gets the handoff return from coder once: "interrupted_by_restart"
    And coder is prompted once with "check the TLS certificates of svc-a"

  Scenario: killed after the handoff is posted, before the journal records it
    Given the daemon runs as its own process
    And coder will reply "certificates valid until 2027"
    And the daemon will be killed at its fault point "handoff.posted"
    When ori says in "#ops": "@planner is svc-a ready for the audit?"
    And planner calls zooid_handoff with {"agent": "coder", "prompt": "check the TLS certificates of svc-a"}, and the daemon dies before answering
    Then the daemon dies at "handoff.posted" and is started again
    And planner's thread has exactly one handoff to coder: "check the TLS certificates of svc-a"
    And coder is prompted once with "check the TLS certificates of svc-a"
    And planner gets the handoff return from coder once: "certificates valid until 2027"

  Scenario: killed after the return is journaled, before the caller is woken
    Given the daemon runs as its own process
    And coder will take a turn that:
      | waits until | released                      |
      | says        | certificates valid until 2027 |
    And the daemon will be killed at its fault point "handoff.returned"
    When ori says in "#ops": "@planner is svc-a ready for the audit?"
    And planner calls zooid_handoff with {"agent": "coder", "prompt": "check the TLS certificates of svc-a"}
    Then the result includes {"status": "started"}
    When coder's turn is released
    Then the daemon dies at "handoff.returned" and is started again
    And planner gets the handoff return from coder once: "certificates valid until 2027"
    And coder is prompted once with "check the TLS certificates of svc-a"

  Scenario: a return the caller has taken is not delivered again after a restart
    Given the daemon runs as its own process
    And coder will reply "certificates valid until 2027"
    When ori says in "#ops": "@planner is svc-a ready for the audit?"
    And planner calls zooid_handoff with {"agent": "coder", "prompt": "check the TLS certificates of svc-a"}
    Then planner gets the handoff return from coder once, in the session that handed off: "certificates valid until 2027"
    When the daemon is killed and started again
    Then planner gets the handoff return from coder once: "certificates valid until 2027"
    And planner's thread has exactly one handoff to coder: "check the TLS certificates of svc-a"

  Scenario: a room with a handoff, recorded with its trace, replays through today's daemon
    Given the daemon keeps a trace
    And coder will reply "certificates valid until 2027"
    When ori says in "#ops": "@planner is svc-a ready for the audit?"
    And planner calls zooid_handoff with {"agent": "coder", "prompt": "check the TLS certificates of svc-a"}
    Then planner gets the handoff return from coder once, in the session that handed off: "certificates valid until 2027"
    When "#ops" is recorded with its trace as planner
    Then zooid replay of the recording exits 0

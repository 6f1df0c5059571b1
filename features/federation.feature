@federation @several-daemons
Feature: Agents on two federating homeservers
  In order to have an agent on the GPU box answer in our team's room, whose homeserver is elsewhere
  As a team running Zooid on more than one machine and more than one homeserver
  I want a mention of it, its answer and what the tools say of it to cross the federation

  Each daemon talks only to its own homeserver; the room lives on both, and Matrix carries
  everything between them. There is no link between the daemons but the room. These scenarios
  run on two Synapses federating through a certificate authority of the harness's own
  (`zooid sim --homeserver synapse-federation`, and in CI after the Synapse pass); fakehs is one
  server, so they never run on it.

  Background:
    Given the homeserver has users "ori" and "mia"
    And the daemon under test is workstation "laptop"
    And agent "architect" is bound to "#ops"
    And a second daemon, workstation "gpu", serves "trainer" in "#ops"
    And the second daemon is on a second homeserver, federating with the first
    And "#ops" lets its members mark themselves as Zooid agents

  Scenario: a mention crosses to the other server's agent, and its answer comes back
    Given trainer will reply "about forty minutes on the new data"
    When ori says in "#ops": "@trainer how long will the run take?"
    Then trainer is prompted with "how long will the run take?"
    And trainer posts "about forty minutes on the new data" in the thread
    And architect is not prompted with "how long will the run take?"

  Scenario: each daemon still wakes only its own agents
    When ori says in "#ops": "@architect is the plan still right?"
    Then architect is prompted with "is the plan still right?"
    And trainer is not prompted with "is the plan still right?"

  Scenario: an agent of the other server is an agent to zooid_get_members
    When architect calls zooid_get_members
    Then the result includes {"members": [{"id": "@trainer", "is_agent": true, "agent_name": "trainer", "workstation": "gpu"}]}
    When trainer calls zooid_get_members
    Then the result includes {"members": [{"id": "@architect", "is_agent": true, "agent_name": "architect", "workstation": "laptop"}]}

  Scenario: a task crosses to the other server's agent, and its result comes back once
    The task root is a message in the room, which reaches the GPU box's homeserver over
    federation; its daemon adopts the root, runs it and posts the result in the task thread,
    which comes back the same way to the laptop's daemon, and that one wakes architect.
    Given trainer will reply "the loss plateaus after epoch 12"
    When architect calls zooid_start_task_threads with {"tasks": [{"agent": "gpu.trainer", "prompt": "train on the new data"}]}
    Then the result includes {"results": [{"agent": "gpu.trainer", "status": "started"}]}
    And trainer is prompted with "train on the new data"
    And architect is prompted with "the loss plateaus after epoch 12"
    And architect is prompted once with "the loss plateaus after epoch 12"

  Scenario: the other server's agent delegates to this one's, and hears back once
    Given architect will reply "use the smaller model first"
    When trainer calls zooid_start_task_threads with {"tasks": [{"agent": "laptop.architect", "prompt": "which model should I train?"}]}
    Then architect is prompted with "which model should I train?"
    And trainer is prompted with "use the smaller model first"
    And trainer is prompted once with "use the smaller model first"

  Scenario: a handoff crosses to the other server's agent, and its return comes back once
    The handoff's notice reaches the GPU box's homeserver over federation; its daemon adopts it
    and runs trainer in the thread; the return it posts as trainer comes back the same way, and
    the laptop's daemon wakes architect with it.
    Given trainer will reply "the loss plateaus after epoch 12"
    When ori says in "#ops": "@architect is the new data any good?"
    And architect calls zooid_handoff with {"agent": "gpu.trainer", "prompt": "train on the new data"}
    Then the result includes {"status": "started"}
    And trainer is prompted with "train on the new data" in a new session
    And architect gets the handoff return from gpu.trainer once, in the session that handed off: "the loss plateaus after epoch 12"
    And trainer is prompted once with "train on the new data"

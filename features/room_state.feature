@mcp
Feature: The room tools stay true as the room changes
  In order to address the right people in a room whose name and members change
  As an agent asking who and where it is
  I need zooid_get_room_info, zooid_get_members and zooid_get_rooms to show the room as it is now

  The daemon answers these tools from its own view of each room's state: read once when it
  starts, then kept from the events the homeserver sends it (zooid/roomstate).

  Background:
    Given the homeserver has users "ori" and "mia"
    And agents "agent-a" and "agent-b" are bound to "#ops"

  Scenario: the members say which of them are agents
    When agent-a calls zooid_get_members
    Then the result includes:
      """json
      {"members": [
        {"id": "@agent-a", "is_agent": true, "agent_name": "agent-a"},
        {"id": "@agent-b", "is_agent": true, "agent_name": "agent-b"},
        {"id": "@ori", "is_agent": false},
        {"id": "@mia", "is_agent": false}
      ]}
      """

  Scenario: the rooms are every room the agent may post to
    Given agent "agent-a" is bound to "#dev"
    When agent-a calls zooid_get_rooms
    Then the result has 2 rooms
    And the result includes {"rooms": [{"id": "#ops", "transport": "matrix"}, {"id": "#dev", "transport": "matrix"}]}

  Scenario: a renamed room is named anew
    When agent-a calls zooid_get_room_info
    Then the room info is "#ops", named "#ops", on the matrix transport
    When ori renames "#ops" to "Ops war room"
    And agent-a calls zooid_get_room_info
    Then the room info is "#ops", named "Ops war room", on the matrix transport
    When agent-a calls zooid_get_rooms
    Then the result has 1 room
    And the result includes {"rooms": [{"id": "#ops", "name": "Ops war room", "transport": "matrix"}]}

  Scenario: a room without a name is named by its canonical alias, and follows it
    When agent-a calls zooid_get_room_info
    Then the room info is "#ops", named "#ops", on the matrix transport
    When ori removes the name of "#ops"
    And agent-a calls zooid_get_room_info
    Then the result includes {"id": "#ops", "name": "#ops:alias", "transport": "matrix"}
    When ori makes "#war-room" the canonical alias of "#ops"
    And agent-a calls zooid_get_room_info
    Then the result includes {"id": "#ops", "name": "#war-room:alias", "transport": "matrix"}

  Scenario: members who leave are gone, and come back under the name they chose
    When agent-a calls zooid_get_members
    Then the result has 4 members
    When mia leaves "#ops"
    And agent-a calls zooid_get_members
    Then the result has 3 members
    And the result includes {"members": [{"id": "@ori", "name": "ori"}, {"id": "@agent-a"}, {"id": "@agent-b"}]}
    When mia joins "#ops"
    And mia changes her display name to "Mia R."
    And agent-a calls zooid_get_members
    Then the result has 4 members
    And the result includes {"members": [{"id": "@mia", "name": "Mia R.", "is_agent": false}]}

  Scenario: an agent removed from the room is no longer among its members
    When agent-a calls zooid_get_members
    Then the result has 4 members
    When ori removes agent-b from "#ops"
    And agent-a calls zooid_get_members
    Then the result has 3 members
    And the result includes {"members": [{"id": "@ori"}, {"id": "@mia"}, {"id": "@agent-a", "is_agent": true, "agent_name": "agent-a"}]}

  Scenario: what changed while the daemon was down is there when it is back
    Given the daemon runs as its own process
    When agent-a calls zooid_get_room_info
    Then the room info is "#ops", named "#ops", on the matrix transport
    When the daemon is stopped
    And ori renames "#ops" to "Ops after hours"
    And mia leaves "#ops"
    And the daemon is started again
    And agent-a calls zooid_get_room_info
    Then the room info is "#ops", named "Ops after hours", on the matrix transport
    When agent-a calls zooid_get_members
    Then the result has 3 members
    And the result includes {"members": [{"id": "@ori"}, {"id": "@agent-a"}, {"id": "@agent-b"}]}

  # The same read serves the start-up's other needs: which members are other daemons' agents
  # (dev.zooid.agent, several_daemons.feature) and whether the room is encrypted
  # (m.room.encryption, encrypted_rooms.feature). Stopping the daemon waits for its start-up
  # work, so every request it made is counted by then.
  @fake-only
  Scenario: starting reads each bound room's state once, and no piece of it again
    Given the daemon runs as its own process
    When agent-a calls zooid_get_room_info
    Then the room info is "#ops", named "#ops", on the matrix transport
    When the daemon is stopped
    Then the homeserver was asked GET /_matrix/client/v3/rooms/*/state at most once as an agent
    And the homeserver was asked no GET /_matrix/client/v3/rooms/*/state/m.room.encryption/* as an agent

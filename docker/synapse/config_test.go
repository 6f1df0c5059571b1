package synapse

import (
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestConfigTurnsOffWhatZooidDoesNotUse: the test homeserver sends no
// federation and keeps no user directory or room statistics (config.go says
// why); the feature pass and the conformance suite run on it in CI.
func TestConfigTurnsOffWhatZooidDoesNotUse(t *testing.T) {
	g, err := generate(&settings{serverName: "localhost", port: 8008})
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		FederationSenders []string `yaml:"federation_sender_instances"`
		UserDirectory     *bool    `yaml:"update_user_directory"`
		Stats             struct {
			Enabled *bool `yaml:"enabled"`
		} `yaml:"stats"`
		Presence struct {
			Enabled *bool `yaml:"enabled"`
		} `yaml:"presence"`
	}
	if err := yaml.Unmarshal(g.homeserver, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.FederationSenders == nil || len(cfg.FederationSenders) != 0 {
		t.Errorf("federation_sender_instances = %v, want []", cfg.FederationSenders)
	}
	for name, v := range map[string]*bool{"update_user_directory": cfg.UserDirectory, "stats.enabled": cfg.Stats.Enabled, "presence.enabled": cfg.Presence.Enabled} {
		if v == nil || *v {
			t.Errorf("%s = %v, want false", name, v)
		}
	}
}

// TestConfigTurnsOnAppserviceEncryptionFeatures: the experimental features an
// appservice needs to run its users' devices from its transactions (issue 37)
// are on, under the names Synapse 1.160 reads in synapse/config/experimental.py;
// fakehs/conformance's AppserviceDevices area needs them on Synapse.
func TestConfigTurnsOnAppserviceEncryptionFeatures(t *testing.T) {
	g, err := generate(&settings{serverName: "localhost", port: 8008})
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Experimental map[string]any `yaml:"experimental_features"`
	}
	if err := yaml.Unmarshal(g.homeserver, &cfg); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"msc2409_to_device_messages_enabled", "msc3202_transaction_extensions"} {
		if v, ok := cfg.Experimental[name].(bool); !ok || !v {
			t.Errorf("experimental_features.%s = %v, want true", name, cfg.Experimental[name])
		}
	}
}

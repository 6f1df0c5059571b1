package replay

import (
	"fmt"

	"github.com/zooid-dev/zooid/scenarios"
)

// WriteFeatureFile writes a regression scenario for rec to path.
func WriteFeatureFile(path string, rec *scenarios.Recording, ref string) error {
	return fmt.Errorf("--feature: not yet")
}

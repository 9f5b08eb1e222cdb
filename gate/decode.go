package gate

import (
	"encoding/json"
	"errors"
)

// decode reads an admission object (JSON: the API server sends JSON to
// webhooks).
func decode(raw []byte, into any) error {
	if len(raw) == 0 {
		return errors.New("missing")
	}
	return json.Unmarshal(raw, into)
}

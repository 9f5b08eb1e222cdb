package snapshot

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// strictUnmarshal decodes JSON into a typed object and turns the decoder's
// errors into messages naming the field ("spec.replicas: want int32, got
// string"). Unknown fields are ignored, as the API server's reads may carry
// fields newer than this build.
func strictUnmarshal(js []byte, into any) error {
	dec := json.NewDecoder(bytes.NewReader(js))
	err := dec.Decode(into)
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			field = "(top level)"
		}
		return fmt.Errorf("field %s: cannot use a JSON %s as %s", field, te.Value, goTypeName(te.Type.String()))
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("invalid JSON at offset %d: %w", se.Offset, err)
	}
	// Errors from custom unmarshalers (quantities, int-or-string, times)
	// carry no field path; say what failed.
	return fmt.Errorf("cannot decode: %s", strings.TrimPrefix(err.Error(), "json: "))
}

func goTypeName(t string) string {
	switch t {
	case "int32", "int64", "int":
		return "an integer"
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	}
	if strings.HasPrefix(t, "map[") || strings.HasPrefix(t, "struct") {
		return "an object"
	}
	if strings.HasPrefix(t, "[]") {
		return "a list"
	}
	return t
}

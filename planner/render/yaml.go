package render

import (
	"encoding/json"
	"io"

	yamlv3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"

	"github.com/rollplan/rollplan/planner/plan"
)

// YAML prints the plan as YAML with the JSON field names, in schema order
// (JSON is YAML: decoding it into a node keeps the order of the fields).
type YAML struct{}

// Render implements Renderer.
func (YAML) Render(w io.Writer, p *plan.Plan) error {
	js, err := json.Marshal(p)
	if err != nil {
		return err
	}
	var n yamlv3.Node
	if err := yamlv3.Unmarshal(js, &n); err != nil {
		return err
	}
	plainStyle(&n)
	enc := yamlv3.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return err
	}
	return enc.Close()
}

// plainStyle drops the JSON flow style and quoting so the output reads as
// ordinary block YAML.
func plainStyle(n *yamlv3.Node) {
	n.Style &^= yamlv3.FlowStyle | yamlv3.DoubleQuotedStyle
	for _, c := range n.Content {
		plainStyle(c)
	}
}

// YAMLValue prints v as YAML with the JSON field names, keys sorted: the
// YAML status and history have always printed (unlike a plan's, in schema
// order), kept so their output does not change.
func YAMLValue(w io.Writer, v any) error {
	b, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

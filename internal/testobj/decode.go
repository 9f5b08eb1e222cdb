package testobj

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
)

// decodeScheme is client-go's scheme with the CustomResourceDefinition
// (rollplan's manifests ship one).
var decodeScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := scheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

// DecodeStream decodes a multi-document YAML stream (rendered manifests)
// into typed objects with client-go's strict decoder, so a document that
// is not a valid API object fails. Documents with nothing but blank
// lines, "---" and comments are skipped.
func DecodeStream(stream []byte) ([]runtime.Object, error) {
	dec := serializer.NewCodecFactory(decodeScheme, serializer.EnableStrict).UniversalDeserializer()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	var objs []runtime.Object
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		content := false
		for line := range strings.Lines(string(doc)) {
			if l := strings.TrimSpace(line); l != "" && l != "---" && !strings.HasPrefix(l, "#") {
				content = true
			}
		}
		if !content {
			continue
		}
		obj, _, err := dec.Decode(doc, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w\n%s", len(objs)+1, err, doc)
		}
		objs = append(objs, obj)
	}
}

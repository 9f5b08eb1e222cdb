package engine

// Warner is an Engine whose loading found something worth saying but not
// fatal: a Rego package nothing imports, a rule whose name is close to a
// decision point's, a CEL policy whose answer another one overrides. The
// warnings are fixed once the engine is built; callers print them before
// they plan (rollplan plan, test, gate), once per engine.
type Warner interface {
	Warnings() []string
}

// Warnings are e's warnings when it is a Warner, else none.
func Warnings(e Engine) []string {
	if w, ok := e.(Warner); ok {
		return w.Warnings()
	}
	return nil
}

// Noter is an Engine that says how it evaluates where that is worth knowing
// but changes no answer: a Rego rule interpreted rather than compiled (a
// builtin the compiler leaves to OPA, a construct it does not run), a CEL
// expression cel-go evaluates for every pod rather than the fast path, so
// slower. Callers print the notes as the warnings, prefixed "note: ".
type Noter interface {
	Notes() []string
}

// Notes are e's notes when it is a Noter, else none.
func Notes(e Engine) []string {
	if n, ok := e.(Noter); ok {
		return n.Notes()
	}
	return nil
}

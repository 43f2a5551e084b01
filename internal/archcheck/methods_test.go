package archcheck

// Issue 39, item 7: no type over maxMethods methods, except the store
// facade. A type that grows past it holds more than one responsibility:
// split it by responsibility (a part that Front or Runner holds, with its
// own narrow dependencies), not by file.

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"testing"
)

// maxMethods is the most methods a type may have.
const maxMethods = 45

// overMethods are the types allowed past maxMethods, each with why.
var overMethods = map[string]string{
	"taskstore.Store": "the store facade over Redis (one method a store operation, as asynq's RDB)",
	"taskstore.keys":  "the facade's Redis key names, one method a key",
}

// methodCounts counts the methods declared on each named type in the
// files (name → source) of package pkg, keyed "pkg.Type". A generic
// type's methods count under its name.
func methodCounts(pkg string, files map[string]any) (map[string]int, error) {
	counts := map[string]int{}
	fset := token.NewFileSet()
	for name, src := range files {
		f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Recv == nil || len(fd.Recv.List) == 0 {
				continue
			}
			if id := receiverType(fd.Recv.List[0].Type); id != "" {
				counts[pkg+"."+id]++
			}
		}
	}
	return counts, nil
}

// receiverType is the name of a receiver's type: T, *T, T[P], *T[P, Q].
func receiverType(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	switch x := e.(type) {
	case *ast.IndexExpr:
		e = x.X
	case *ast.IndexListExpr:
		e = x.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// overLimit is the types of counts past maxMethods and not allowed.
func overLimit(counts map[string]int) []string {
	var out []string
	for _, k := range sortedKeys(counts) {
		if _, ok := overMethods[k]; counts[k] > maxMethods && !ok {
			out = append(out, fmt.Sprintf("%s has %d methods (at most %d): split it by responsibility", k, counts[k], maxMethods))
		}
	}
	return out
}

func TestMethodCounts(t *testing.T) {
	root, module := moduleRoot(t)
	pkgs, err := modulePackages(root, module)
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]int{}
	for _, pkg := range sortedKeys(pkgs) {
		dir := filepath.Join(root, filepath.FromSlash(pkg))
		names, err := sourceFiles(dir)
		if err != nil {
			t.Fatal(err)
		}
		files := map[string]any{}
		for _, n := range names {
			files[filepath.Join(dir, n)] = nil // read from disk
		}
		counts, err := methodCounts(pkg, files)
		if err != nil {
			t.Fatal(err)
		}
		for k, n := range counts {
			all[k] = n
		}
	}
	for _, p := range overLimit(all) {
		t.Error(p)
	}
	// The allowances stay true: one no longer needed is dropped.
	for _, k := range sortedKeys(overMethods) {
		if all[k] <= maxMethods {
			t.Errorf("%s has %d methods: drop its allowance in overMethods", k, all[k])
		}
	}
	if all["taskstore.Store"] == 0 {
		t.Error("no methods counted on taskstore.Store: the walk is wrong")
	}
}

// TestMethodCountsCatchPlantedType: a type with one method too many fails,
// its pointer and generic receivers counted alike; one at the limit and
// an allowed one pass.
func TestMethodCountsCatchPlantedType(t *testing.T) {
	src := func(recv string, n int) string {
		s := "package p\n"
		for i := range n {
			s += fmt.Sprintf("func (x %s) M%d() {}\n", recv, i)
		}
		return s
	}
	counts, err := methodCounts("p", map[string]any{
		"big.go":     src("*Big", maxMethods) + "type Big struct{}\n",
		"big2.go":    "package p\nfunc (b Big) Extra() {}\n",
		"gen.go":     src("*Gen[T]", maxMethods+1) + "type Gen[T any] struct{}\n",
		"pair.go":    src("Pair[K, V]", 3) + "type Pair[K, V any] struct{}\n",
		"limit.go":   src("Limit", maxMethods) + "type Limit struct{}\n",
		"funcs.go":   "package p\nfunc F() {}\n",
		"allowed.go": src("*Store", maxMethods+5) + "type Store struct{}\n",
	})
	if err != nil {
		t.Fatal(err)
	}
	if counts["p.Big"] != maxMethods+1 || counts["p.Gen"] != maxMethods+1 || counts["p.Pair"] != 3 || counts["p.Limit"] != maxMethods {
		t.Fatalf("counts %v", counts)
	}
	got := overLimit(counts)
	if len(got) != 3 { // Big, Gen and Store (p.Store is not taskstore.Store)
		t.Fatalf("over the limit: %q; want p.Big, p.Gen and p.Store", got)
	}
	counts["taskstore.Store"] = maxMethods + 100
	if got := overLimit(counts); len(got) != 3 {
		t.Fatalf("the allowed facade reported: %q", got)
	}
}

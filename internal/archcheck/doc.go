// Package archcheck holds the tests that keep the structure's docs true
// (issue 39, item 8); it has no code of its own beyond this comment.
//
//   - archcheck_test.go: the package map of docs/ARCHITECTURE.md (its
//     drawn imports and its table) against the module's packages and their
//     imports as go/build reads them, and every doc.go file index against
//     its package's files. The rules are stated in docs/ARCHITECTURE.md,
//     "Package map", and each check is shown to fail on a planted error.
//   - methods_test.go: no type of the module over 45 methods but the
//     store facade and the allowances it names with why (issue 39,
//     item 7), shown to fail on a planted type.
package archcheck

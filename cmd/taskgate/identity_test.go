package main

import (
	"net/netip"
	"reflect"
	"testing"
)

func TestParseProxies(t *testing.T) {
	got, err := parseProxies([]string{"10.0.0.0/8, 192.0.2.7", "::ffff:192.0.2.8", "2001:db8::1/64"})
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32"),
		netip.MustParsePrefix("192.0.2.8/32"), netip.MustParsePrefix("2001:db8::/64")}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseProxies = %v, want %v", got, want)
	}
	if _, err := parseProxies([]string{"10.0.0.0/33"}); err == nil {
		t.Error("10.0.0.0/33: no error")
	}
}

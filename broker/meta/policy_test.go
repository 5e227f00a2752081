package meta

import "testing"

func TestPasswordHashing(t *testing.T) {
	// The worked example of RabbitMQ's password documentation: salt
	// 908DC60A, password "test12".
	const docHash = "kI3GCqW5JLMJa4iX1lo7X4D6XbYqlLgxIs30+P6tENUV2POR"
	if got := hashWithSalt([]byte{0x90, 0x8d, 0xc6, 0x0a}, "test12"); got != docHash {
		t.Fatalf("hash = %s, want RabbitMQ's %s", got, docHash)
	}
	tests := []struct {
		hash, password string
		want           bool
	}{
		{docHash, "test12", true},
		{docHash, "test13", false},
		{docHash, "", false},
		{"not base64!", "x", false},
		{"AAAA", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		if got := (User{PasswordHash: tt.hash}).CheckPassword(tt.password); got != tt.want {
			t.Errorf("CheckPassword(%q, %q) = %v", tt.hash, tt.password, got)
		}
	}
	h1, err := HashPassword("pw")
	must(t, err)
	h2, err := HashPassword("pw")
	must(t, err)
	if h1 == h2 {
		t.Fatal("two hashes of one password are equal: no random salt")
	}
	if !(User{PasswordHash: h1}).CheckPassword("pw") {
		t.Fatal("HashPassword result does not check")
	}
}

func TestMatchPolicy(t *testing.T) {
	policies := []Policy{
		{Name: "all-low", Pattern: ".*", ApplyTo: "all", Priority: 0},
		{Name: "queues-mid", Pattern: "^orders\\.", ApplyTo: "queues", Priority: 5},
		{Name: "ex-high", Pattern: "^orders\\.", ApplyTo: "exchanges", Priority: 10},
		{Name: "quorum", Pattern: "^orders\\.", ApplyTo: "quorum_queues", Priority: 7},
		{Name: "stream", Pattern: "^orders\\.", ApplyTo: "streams", Priority: 8},
		{Name: "classic", Pattern: "^orders\\.", ApplyTo: "classic_queues", Priority: 6},
		{Name: "b-tie", Pattern: "^tie$", ApplyTo: "all", Priority: 3},
		{Name: "a-tie", Pattern: "^tie$", ApplyTo: "all", Priority: 3},
		{Name: "broken", Pattern: "(", ApplyTo: "all", Priority: 100},
		{Name: "unanchored", Pattern: "mid", ApplyTo: "queues", Priority: 2},
	}
	tests := []struct {
		name, kind, want string
	}{
		{"orders.eu", "queue", "classic"},
		{"orders.eu", "quorum", "quorum"},
		{"orders.eu", "stream", "stream"},
		{"orders.eu", "exchange", "ex-high"},
		{"other", "queue", "all-low"},
		{"tie", "queue", "a-tie"},
		{"a-middle-name", "queue", "unanchored"},
		{"a-middle-name", "exchange", "all-low"},
	}
	for _, tt := range tests {
		p, ok := MatchPolicy(policies, tt.name, tt.kind)
		if !ok || p.Name != tt.want {
			t.Errorf("MatchPolicy(%q, %q) = %q %v, want %q", tt.name, tt.kind, p.Name, ok, tt.want)
		}
	}
	if _, ok := MatchPolicy([]Policy{{Name: "q", Pattern: ".*", ApplyTo: "queues"}}, "x", "exchange"); ok {
		t.Error("queues policy applied to an exchange")
	}
	if _, ok := MatchPolicy(nil, "x", "queue"); ok {
		t.Error("match without policies")
	}
}

func TestCheckPermission(t *testing.T) {
	p := Permission{Configure: "^(amq\\.gen.*|tmp)$", Write: "orders", Read: ".*"}
	tests := []struct {
		kind     Access
		resource string
		want     bool
	}{
		{Configure, "amq.gen-abc", true},
		{Configure, "tmp", true},
		{Configure, "tmp2", false},
		{Write, "orders", true},
		{Write, "eu.orders.x", true}, // unanchored, as RabbitMQ's re:run
		{Write, "order", false},
		{Read, "", true},
		{Read, "anything", true},
	}
	compiled := CompilePermission(p)
	for _, tt := range tests {
		if got := CheckPermission(p, tt.kind, tt.resource); got != tt.want {
			t.Errorf("CheckPermission(%v, %q) = %v, want %v", tt.kind, tt.resource, got, tt.want)
		}
		if got := compiled.Check(tt.kind, tt.resource); got != tt.want {
			t.Errorf("CompilePermission.Check(%v, %q) = %v, want %v", tt.kind, tt.resource, got, tt.want)
		}
	}
	if (CompiledPermission{}).Check(Read, "x") || compiled.Check(Access(7), "x") {
		t.Error("zero CompiledPermission or unknown access allowed")
	}
	deny := Permission{Configure: "", Write: "(", Read: "^amq\\.default$"}
	if CheckPermission(deny, Configure, "x") {
		t.Error("empty pattern allowed")
	}
	if CheckPermission(deny, Write, "(") {
		t.Error("invalid pattern allowed")
	}
	if !CheckPermission(deny, Read, "") {
		t.Error("default exchange not checked as amq.default")
	}
}

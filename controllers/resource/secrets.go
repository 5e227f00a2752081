package resource

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/url"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	warrenv1 "github.com/warrenmq/warren/api/v1alpha1"
)

// DefaultUserSecretBuilder builds the Secret with the default user's
// credentials. A username and password already in the Secret are kept
// (a user may create the Secret before the Broker to choose them); missing
// ones are generated. The broker creates this user, as an administrator, on
// its first start; changing the Secret later does not change the user.
type DefaultUserSecretBuilder struct{ Broker *warrenv1.Broker }

// Build returns the empty Secret.
func (s *DefaultUserSecretBuilder) Build() (client.Object, error) {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: DefaultUserSecretName(s.Broker), Namespace: s.Broker.Namespace}}, nil
}

// Update fills in the credentials and the connection details.
func (s *DefaultUserSecretBuilder) Update(obj client.Object) error {
	sec := obj.(*corev1.Secret)
	prepareSecret(sec, s.Broker)
	if err := generateMissing(sec, KeyUsername, "default_user_", 12); err != nil {
		return err
	}
	if err := generateMissing(sec, KeyPassword, "", 24); err != nil {
		return err
	}
	host := ClientHost(s.Broker)
	sec.Data[KeyHost] = []byte(host)
	sec.Data[KeyPort] = []byte(strconv.Itoa(PortAMQP))
	u := url.URL{Scheme: "amqp", User: url.UserPassword(string(sec.Data[KeyUsername]), string(sec.Data[KeyPassword])),
		Host: fmt.Sprintf("%s:%d", host, PortAMQP)}
	sec.Data[KeyURI] = []byte(u.String())
	return nil
}

// JoinSecretBuilder builds the Secret with the token nodes present to each
// other to join the cluster. The token is generated once and kept.
type JoinSecretBuilder struct{ Broker *warrenv1.Broker }

// Build returns the empty Secret.
func (s *JoinSecretBuilder) Build() (client.Object, error) {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: JoinSecretName(s.Broker), Namespace: s.Broker.Namespace}}, nil
}

// Update generates the token when it is missing.
func (s *JoinSecretBuilder) Update(obj client.Object) error {
	sec := obj.(*corev1.Secret)
	prepareSecret(sec, s.Broker)
	return generateMissing(sec, KeyToken, "", 48)
}

// prepareSecret labels a Secret the operator manages and gives it a type
// and a data map if it has none.
func prepareSecret(sec *corev1.Secret, b *warrenv1.Broker) {
	sec.Labels = mergeLabels(sec.Labels, Labels(b))
	if sec.Type == "" {
		sec.Type = corev1.SecretTypeOpaque
	}
	if sec.Data == nil {
		sec.Data = map[string][]byte{}
	}
}

// generateMissing sets key to prefix and n random characters unless the
// Secret already holds a value for it (a value is generated once, then kept).
func generateMissing(sec *corev1.Secret, key, prefix string, n int) error {
	if len(sec.Data[key]) > 0 {
		return nil
	}
	v, err := randomString(n)
	if err != nil {
		return err
	}
	sec.Data[key] = []byte(prefix + v)
	return nil
}

// randomString returns n URL-safe random characters.
func randomString(n int) (string, error) {
	buf := make([]byte, n)
	if _, err := rand.Read(buf); err != nil {
		return "", fmt.Errorf("generate secret: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(buf)[:n], nil
}

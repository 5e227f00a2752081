package mgmt

import "net/http"

// Tag is the least a user's tags must give to call a route, as RabbitMQ's
// management plugin decides (rabbit_mgmt_util:is_authorized_*). Every
// route needs a management user: one tagged management, policymaker,
// monitoring or administrator; a user with none of them is refused
// everywhere. Policymaker and monitoring are not ranked against each
// other: administrator has what both have.
type Tag int

// The tags, from the least to the most.
const (
	// TagManagement: any management user (is_authorized).
	TagManagement Tag = iota
	// TagPolicymaker: policymaker or administrator (is_authorized_policies).
	TagPolicymaker
	// TagMonitoring: monitoring or administrator (is_authorized_monitor).
	TagMonitoring
	// TagAdministrator: administrator (is_authorized_admin).
	TagAdministrator
)

func (t Tag) String() string {
	return [...]string{"management", "policymaker", "monitoring", "administrator"}[t]
}

// VhostFrom is where a route finds the vhost it acts on.
type VhostFrom int

const (
	// VhostNone: the route acts on no vhost in particular; what it lists is
	// cut to the vhosts the caller may see (see Server.sees).
	VhostNone VhostFrom = iota
	// VhostPath: the {vhost} path segment. A caller who is not an
	// administrator needs access to it (a permission entry there, whatever
	// its patterns), else 401 (is_authorized_vhost). A vhost that does not
	// exist passes, and the route answers 404.
	VhostPath
)

// Route is one endpoint of the API: what it needs of its caller, and its
// handler. What the route then does in the vhost is checked by the handler
// against the caller's permission patterns, as AMQP checks them (see
// Server.access): declaring and deleting need configure on the name,
// purging and getting need read on the queue, publishing needs write on
// the exchange, binding needs write on the destination and read on the
// source; a new queue's dead-letter exchange and a new exchange's alternate
// exchange need write on it and read on the new object. Administrators pass
// the route's tag and vhost checks but, as in RabbitMQ, not those: they act
// in a vhost only with permissions there.
type Route struct {
	// Pattern is the method and path, as http.ServeMux reads them; a GET
	// route also answers HEAD, with the same checks.
	Pattern string
	Tag     Tag
	Vhost   VhostFrom
	// Others is the tag that reaches other users' connections and channels
	// on this route; a caller without it sees (or closes) only their own.
	// Routes about other things leave it TagManagement: everyone's.
	Others Tag
	fn     handlerFunc
}

type handlerFunc func(s *Server, w http.ResponseWriter, r *http.Request, u caller)

// Routes returns the API's routes: the one table the server registers and
// the authorization walk test iterates.
func Routes() []Route {
	const (
		mgmt, policy, monitor, admin = TagManagement, TagPolicymaker, TagMonitoring, TagAdministrator
		none, path                   = VhostNone, VhostPath
	)
	return []Route{
		{Pattern: "GET /api/overview", Tag: mgmt, Vhost: none, Others: monitor, fn: (*Server).overview},
		{Pattern: "GET /api/whoami", Tag: mgmt, Vhost: none, fn: (*Server).whoami},
		{Pattern: "GET /api/nodes", Tag: monitor, Vhost: none, fn: (*Server).listNodes},
		{Pattern: "GET /api/nodes/{name}", Tag: monitor, Vhost: none, fn: (*Server).getNode},
		{Pattern: "GET /api/nodes/{name}/memory", Tag: monitor, Vhost: none, fn: (*Server).nodeMemory},
		{Pattern: "GET /api/cluster-name", Tag: mgmt, Vhost: none, fn: (*Server).getClusterName},
		{Pattern: "GET /api/cluster/status", Tag: monitor, Vhost: none, fn: (*Server).clusterStatus},
		{Pattern: "DELETE /api/cluster/nodes/{name}", Tag: admin, Vhost: none, fn: (*Server).forgetNode},
		{Pattern: "POST /api/cluster/leave", Tag: admin, Vhost: none, fn: (*Server).leaveCluster},
		{Pattern: "POST /api/cluster/join", Tag: admin, Vhost: none, fn: (*Server).joinCluster},
		{Pattern: "POST /api/cluster/drain", Tag: admin, Vhost: none, fn: (*Server).drainNode},
		{Pattern: "POST /api/cluster/decommission", Tag: admin, Vhost: none, fn: (*Server).decommissionNode},
		{Pattern: "GET /api/extensions", Tag: mgmt, Vhost: none, fn: (*Server).extensions},
		{Pattern: "GET /api/feature-flags", Tag: mgmt, Vhost: none, fn: (*Server).featureFlags},
		{Pattern: "GET /api/deprecated-features", Tag: mgmt, Vhost: none, fn: (*Server).listNone},
		{Pattern: "GET /api/deprecated-features/used", Tag: mgmt, Vhost: none, fn: (*Server).listNone},

		{Pattern: "GET /api/vhosts", Tag: mgmt, Vhost: none, fn: (*Server).listVhosts},
		{Pattern: "GET /api/vhosts/{vhost}", Tag: admin, Vhost: path, fn: (*Server).getVhost},
		{Pattern: "PUT /api/vhosts/{vhost}", Tag: admin, Vhost: path, fn: (*Server).putVhost},
		{Pattern: "DELETE /api/vhosts/{vhost}", Tag: admin, Vhost: path, fn: (*Server).deleteVhost},
		{Pattern: "GET /api/vhosts/{vhost}/permissions", Tag: admin, Vhost: path, fn: (*Server).listVhostPermissions},
		{Pattern: "GET /api/vhosts/{vhost}/connections", Tag: mgmt, Vhost: path, Others: monitor, fn: (*Server).listVhostConnections},
		{Pattern: "GET /api/vhost-limits", Tag: mgmt, Vhost: none, fn: (*Server).listNone},
		{Pattern: "GET /api/vhost-limits/{vhost}", Tag: mgmt, Vhost: path, fn: (*Server).listNone},
		{Pattern: "PUT /api/vhost-limits/{vhost}/{name}", Tag: admin, Vhost: path, fn: (*Server).unsupported},
		{Pattern: "DELETE /api/vhost-limits/{vhost}/{name}", Tag: admin, Vhost: path, fn: (*Server).clearLimit},

		{Pattern: "GET /api/users", Tag: admin, Vhost: none, fn: (*Server).listUsers},
		{Pattern: "GET /api/users/{user}", Tag: admin, Vhost: none, fn: (*Server).getUser},
		{Pattern: "PUT /api/users/{user}", Tag: admin, Vhost: none, fn: (*Server).putUser},
		{Pattern: "DELETE /api/users/{user}", Tag: admin, Vhost: none, fn: (*Server).deleteUser},
		{Pattern: "GET /api/user-limits", Tag: admin, Vhost: none, fn: (*Server).listNone},
		{Pattern: "GET /api/user-limits/{user}", Tag: mgmt, Vhost: none, Others: monitor, fn: (*Server).listUserLimits},
		{Pattern: "PUT /api/user-limits/{user}/{name}", Tag: admin, Vhost: none, fn: (*Server).unsupported},
		{Pattern: "DELETE /api/user-limits/{user}/{name}", Tag: admin, Vhost: none, fn: (*Server).clearLimit},

		{Pattern: "GET /api/permissions", Tag: admin, Vhost: none, fn: (*Server).listPermissions},
		{Pattern: "GET /api/permissions/{vhost}/{user}", Tag: admin, Vhost: path, fn: (*Server).getPermission},
		{Pattern: "PUT /api/permissions/{vhost}/{user}", Tag: admin, Vhost: path, fn: (*Server).putPermission},
		{Pattern: "DELETE /api/permissions/{vhost}/{user}", Tag: admin, Vhost: path, fn: (*Server).deletePermission},

		{Pattern: "GET /api/policies", Tag: mgmt, Vhost: none, fn: (*Server).listPolicies},
		{Pattern: "GET /api/policies/{vhost}", Tag: mgmt, Vhost: path, fn: (*Server).listPolicies},
		{Pattern: "GET /api/policies/{vhost}/{name}", Tag: policy, Vhost: path, fn: (*Server).getPolicy},
		{Pattern: "PUT /api/policies/{vhost}/{name}", Tag: policy, Vhost: path, fn: (*Server).putPolicy},
		{Pattern: "DELETE /api/policies/{vhost}/{name}", Tag: policy, Vhost: path, fn: (*Server).deletePolicy},

		{Pattern: "GET /api/parameters", Tag: policy, Vhost: none, fn: (*Server).listNone},
		{Pattern: "GET /api/parameters/{component}", Tag: policy, Vhost: none, fn: (*Server).listNone},
		{Pattern: "GET /api/parameters/{component}/{vhost}", Tag: policy, Vhost: path, fn: (*Server).listNone},
		{Pattern: "GET /api/global-parameters", Tag: policy, Vhost: none, fn: (*Server).globalParameters},
		{Pattern: "PUT /api/parameters/{component}/{vhost}/{name}", Tag: policy, Vhost: path, fn: (*Server).unsupported},
		{Pattern: "DELETE /api/parameters/{component}/{vhost}/{name}", Tag: policy, Vhost: path, fn: (*Server).notFound},
		{Pattern: "GET /api/operator-policies", Tag: mgmt, Vhost: none, fn: (*Server).listNone},
		{Pattern: "GET /api/operator-policies/{vhost}", Tag: mgmt, Vhost: path, fn: (*Server).listNone},
		{Pattern: "PUT /api/operator-policies/{vhost}/{name}", Tag: admin, Vhost: path, fn: (*Server).unsupported},
		{Pattern: "DELETE /api/operator-policies/{vhost}/{name}", Tag: admin, Vhost: path, fn: (*Server).notFound},

		{Pattern: "GET /api/queues", Tag: mgmt, Vhost: none, fn: (*Server).listQueues},
		{Pattern: "GET /api/queues/{vhost}", Tag: mgmt, Vhost: path, fn: (*Server).listQueues},
		{Pattern: "GET /api/queues/{vhost}/{name}", Tag: mgmt, Vhost: path, fn: (*Server).getQueue},
		{Pattern: "PUT /api/queues/{vhost}/{name}", Tag: mgmt, Vhost: path, fn: (*Server).putQueue},
		{Pattern: "DELETE /api/queues/{vhost}/{name}", Tag: mgmt, Vhost: path, fn: (*Server).deleteQueue},
		{Pattern: "DELETE /api/queues/{vhost}/{name}/contents", Tag: mgmt, Vhost: path, fn: (*Server).purgeQueue},
		{Pattern: "POST /api/queues/{vhost}/{name}/get", Tag: mgmt, Vhost: path, fn: (*Server).getMessages},
		{Pattern: "GET /api/queues/{vhost}/{name}/bindings", Tag: mgmt, Vhost: path, fn: (*Server).listQueueBindings},

		{Pattern: "GET /api/exchanges", Tag: mgmt, Vhost: none, fn: (*Server).listExchanges},
		{Pattern: "GET /api/exchanges/{vhost}", Tag: mgmt, Vhost: path, fn: (*Server).listExchanges},
		{Pattern: "GET /api/exchanges/{vhost}/{name}", Tag: mgmt, Vhost: path, fn: (*Server).getExchange},
		{Pattern: "PUT /api/exchanges/{vhost}/{name}", Tag: mgmt, Vhost: path, fn: (*Server).putExchange},
		{Pattern: "DELETE /api/exchanges/{vhost}/{name}", Tag: mgmt, Vhost: path, fn: (*Server).deleteExchange},
		{Pattern: "POST /api/exchanges/{vhost}/{name}/publish", Tag: mgmt, Vhost: path, fn: (*Server).publishMessage},
		{Pattern: "GET /api/exchanges/{vhost}/{name}/bindings/{side}", Tag: mgmt, Vhost: path, fn: (*Server).listExchangeBindings},

		{Pattern: "GET /api/bindings", Tag: mgmt, Vhost: none, fn: (*Server).listBindings},
		{Pattern: "GET /api/bindings/{vhost}", Tag: mgmt, Vhost: path, fn: (*Server).listBindings},
		{Pattern: "GET /api/bindings/{vhost}/e/{exchange}/q/{queue}", Tag: mgmt, Vhost: path, fn: (*Server).listBindingsBetween},
		{Pattern: "POST /api/bindings/{vhost}/e/{exchange}/q/{queue}", Tag: mgmt, Vhost: path, fn: (*Server).postBinding},
		{Pattern: "GET /api/bindings/{vhost}/e/{exchange}/e/{dest}", Tag: mgmt, Vhost: path, fn: (*Server).listBindingsBetween},
		{Pattern: "POST /api/bindings/{vhost}/e/{exchange}/e/{dest}", Tag: mgmt, Vhost: path, fn: (*Server).postBinding},
		{Pattern: "DELETE /api/bindings/{vhost}/e/{exchange}/q/{queue}/{props}", Tag: mgmt, Vhost: path, fn: (*Server).deleteBinding},
		{Pattern: "DELETE /api/bindings/{vhost}/e/{exchange}/e/{dest}/{props}", Tag: mgmt, Vhost: path, fn: (*Server).deleteBinding},

		{Pattern: "GET /api/connections", Tag: mgmt, Vhost: none, Others: monitor, fn: (*Server).listConnections},
		{Pattern: "GET /api/connections/{name}", Tag: mgmt, Vhost: none, Others: monitor, fn: (*Server).getConnection},
		{Pattern: "DELETE /api/connections/{name}", Tag: mgmt, Vhost: none, Others: admin, fn: (*Server).deleteConnection},
		{Pattern: "GET /api/connections/username/{user}", Tag: mgmt, Vhost: none, Others: monitor, fn: (*Server).listUserConnections},
		{Pattern: "DELETE /api/connections/username/{user}", Tag: mgmt, Vhost: none, Others: admin, fn: (*Server).closeUserConnections},
		{Pattern: "GET /api/channels", Tag: mgmt, Vhost: none, Others: monitor, fn: (*Server).listChannels},
		{Pattern: "GET /api/consumers", Tag: mgmt, Vhost: none, Others: monitor, fn: (*Server).listConsumers},
		{Pattern: "GET /api/consumers/{vhost}", Tag: mgmt, Vhost: path, Others: monitor, fn: (*Server).listConsumers},

		{Pattern: "GET /api/definitions", Tag: admin, Vhost: none, fn: (*Server).getDefinitions},
		{Pattern: "POST /api/definitions", Tag: admin, Vhost: none, fn: (*Server).postDefinitions},
		{Pattern: "GET /api/definitions/{vhost}", Tag: admin, Vhost: path, fn: (*Server).getDefinitions},
		{Pattern: "POST /api/definitions/{vhost}", Tag: admin, Vhost: path, fn: (*Server).postDefinitions},

		{Pattern: "GET /api/health/checks/alarms", Tag: mgmt, Vhost: none, fn: (*Server).healthAlarms},
		{Pattern: "GET /api/health/checks/local-alarms", Tag: mgmt, Vhost: none, fn: (*Server).healthAlarms},
		{Pattern: "GET /api/health/checks/virtual-hosts", Tag: mgmt, Vhost: none, fn: (*Server).healthVhosts},
		{Pattern: "GET /api/health/checks/port-listener/{port}", Tag: mgmt, Vhost: none, fn: (*Server).healthPort},
		{Pattern: "GET /api/health/checks/ready", Tag: mgmt, Vhost: none, fn: (*Server).healthReady},
		{Pattern: "GET /api/health/checks/protocol-listener/{protocols}", Tag: mgmt, Vhost: none, fn: (*Server).healthProtocols},
		{Pattern: "GET /api/health/checks/node-is-quorum-critical", Tag: mgmt, Vhost: none, fn: (*Server).healthQuorumCritical},
		{Pattern: "GET /api/aliveness-test/{vhost}", Tag: mgmt, Vhost: path, fn: (*Server).aliveness},
	}
}

func (s *Server) routes() {
	for _, rt := range Routes() {
		s.handle(rt)
	}
	// Probes that kubelets run without credentials.
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.HandleFunc("GET /readyz", s.readyz)
}

package mgmt

import "net/http"

func (s *Server) routes() {
	s.handle("GET /api/overview", levelRead, s.overview)
	s.handle("GET /api/whoami", levelRead, s.whoami)
	s.handle("GET /api/nodes", levelRead, s.listNodes)
	s.handle("GET /api/nodes/{name}", levelRead, s.getNode)

	s.handle("GET /api/vhosts", levelRead, s.listVhosts)
	s.handle("GET /api/vhosts/{vhost}", levelRead, s.getVhost)
	s.handle("PUT /api/vhosts/{vhost}", levelAdmin, s.putVhost)
	s.handle("DELETE /api/vhosts/{vhost}", levelAdmin, s.deleteVhost)

	s.handle("GET /api/users", levelAdmin, s.listUsers)
	s.handle("GET /api/users/{user}", levelAdmin, s.getUser)
	s.handle("PUT /api/users/{user}", levelAdmin, s.putUser)
	s.handle("DELETE /api/users/{user}", levelAdmin, s.deleteUser)

	s.handle("GET /api/permissions", levelAdmin, s.listPermissions)
	s.handle("GET /api/permissions/{vhost}/{user}", levelAdmin, s.getPermission)
	s.handle("PUT /api/permissions/{vhost}/{user}", levelAdmin, s.putPermission)
	s.handle("DELETE /api/permissions/{vhost}/{user}", levelAdmin, s.deletePermission)

	s.handle("GET /api/policies", levelRead, s.listPolicies)
	s.handle("GET /api/policies/{vhost}", levelRead, s.listPolicies)
	s.handle("GET /api/policies/{vhost}/{name}", levelRead, s.getPolicy)
	s.handle("PUT /api/policies/{vhost}/{name}", levelPolicy, s.putPolicy)
	s.handle("DELETE /api/policies/{vhost}/{name}", levelPolicy, s.deletePolicy)

	s.handle("GET /api/queues", levelRead, s.listQueues)
	s.handle("GET /api/queues/{vhost}", levelRead, s.listQueues)
	s.handle("GET /api/queues/{vhost}/{name}", levelRead, s.getQueue)
	s.handle("PUT /api/queues/{vhost}/{name}", levelPolicy, s.putQueue)
	s.handle("DELETE /api/queues/{vhost}/{name}", levelPolicy, s.deleteQueue)
	s.handle("DELETE /api/queues/{vhost}/{name}/contents", levelPolicy, s.purgeQueue)
	s.handle("POST /api/queues/{vhost}/{name}/get", levelRead, s.getMessages)

	s.handle("GET /api/exchanges", levelRead, s.listExchanges)
	s.handle("GET /api/exchanges/{vhost}", levelRead, s.listExchanges)
	s.handle("GET /api/exchanges/{vhost}/{name}", levelRead, s.getExchange)
	s.handle("POST /api/exchanges/{vhost}/{name}/publish", levelRead, s.publishMessage)
	s.handle("PUT /api/exchanges/{vhost}/{name}", levelPolicy, s.putExchange)
	s.handle("DELETE /api/exchanges/{vhost}/{name}", levelPolicy, s.deleteExchange)

	s.handle("GET /api/bindings", levelRead, s.listBindings)
	s.handle("GET /api/bindings/{vhost}", levelRead, s.listBindings)
	s.handle("GET /api/bindings/{vhost}/e/{exchange}/q/{queue}", levelRead, s.listBindingsBetween)
	s.handle("POST /api/bindings/{vhost}/e/{exchange}/q/{queue}", levelPolicy, s.postBinding)
	s.handle("GET /api/bindings/{vhost}/e/{exchange}/e/{dest}", levelRead, s.listBindingsBetween)
	s.handle("POST /api/bindings/{vhost}/e/{exchange}/e/{dest}", levelPolicy, s.postBinding)
	s.handle("DELETE /api/bindings/{vhost}/e/{exchange}/q/{queue}/{props}", levelPolicy, s.deleteBinding)
	s.handle("DELETE /api/bindings/{vhost}/e/{exchange}/e/{dest}/{props}", levelPolicy, s.deleteBinding)

	s.handle("GET /api/connections", levelRead, s.listConnections)
	s.handle("GET /api/connections/{name}", levelRead, s.getConnection)
	s.handle("DELETE /api/connections/{name}", levelAdmin, s.deleteConnection)
	s.handle("GET /api/channels", levelRead, s.listChannels)

	s.handle("GET /api/definitions", levelAdmin, s.getDefinitions)
	s.handle("POST /api/definitions", levelAdmin, s.postDefinitions)
	s.handle("GET /api/definitions/{vhost}", levelAdmin, s.getDefinitions)
	s.handle("POST /api/definitions/{vhost}", levelAdmin, s.postDefinitions)

	s.handle("GET /api/health/checks/alarms", levelRead, s.healthAlarms)
	s.handle("GET /api/health/checks/local-alarms", levelRead, s.healthAlarms)
	s.handle("GET /api/health/checks/virtual-hosts", levelRead, s.healthVhosts)
	s.handle("GET /api/health/checks/port-listener/{port}", levelRead, s.healthPort)
	s.handle("GET /api/health/checks/ready", levelRead, s.healthReady)
	s.handle("GET /api/aliveness-test/{vhost}", levelRead, s.aliveness)
	// Probes that kubelets run without credentials.
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	s.mux.HandleFunc("GET /readyz", s.readyz)
}

"""Makes the fixtures of the schemathesis run and prints them as a schemathesis.toml.

Redeems an invitation (the code is argv[2]) on the server at argv[1], then creates two replicas
with a knowledge-base entry each and a user, so that the generated requests can reach existing
resources: every `replicaUUID`, `knowledgeBaseID` and `userID` path parameter and every `ownerID`
of a replica body is fixed to them (the deletes get the spare ones). Prints the API key on the
first line and the TOML after it.
"""
import json
import sys
import urllib.request

BASE, CODE = sys.argv[1], sys.argv[2]
OWNER = "ci@example.org"


def call(method, path, body=None, key=None):
    headers = {"content-type": "application/json"}
    if key:
        headers["X-ORGANIZATION-SECRET"] = key
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(BASE + path, data=data, headers=headers, method=method)
    return json.load(urllib.request.urlopen(req))


key = call("POST", f"/v1/api-keys/invites/{CODE}/redeem",
           {"organizationName": "Contract", "name": "Ci", "email": OWNER})["apiKey"]
ids = {}
for name in ("main", "spare"):
    replica = call("POST", "/v1/replicas", {
        "name": f"Contract {name}", "slug": f"contract-{name}", "shortDescription": "CI fixture",
        "greeting": "Hello", "ownerID": OWNER, "llm": {"model": "replicad-extractive"},
    }, key)["uuid"]
    kb = call("POST", f"/v1/replicas/{replica}/knowledge-base",
              {"text": "The lighthouse lamp is visible for 22 nautical miles.", "title": "Lamp"},
              key)["results"][0]["knowledgeBaseID"]
    ids[name] = (replica, kb)
user = call("POST", "/v1/users", {"name": "Fixture User", "email": "fixture@example.org"}, key)["id"]

(replica, kb), (spare_replica, spare_kb) = ids["main"], ids["spare"]
print(key)
print(f'''[parameters]
"path.replicaUUID" = "{replica}"
"path.knowledgeBaseID" = {kb}
"path.userID" = "{user}"
"body.ownerID" = "{OWNER}"

[[operations]]
include-operation-id = "deleteReplica"
parameters = {{ "path.replicaUUID" = "{spare_replica}" }}

[[operations]]
include-operation-id = "deleteKnowledgeBaseEntry"
parameters = {{ "path.replicaUUID" = "{spare_replica}", "path.knowledgeBaseID" = {spare_kb} }}
''')

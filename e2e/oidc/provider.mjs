// A real OpenID provider (oidc-provider) for taskgate's e2e tests of
// --auth-issuer and --auth-introspection-url. It listens on
// 127.0.0.1:$PORT, signs with the private JWKS in the file $KEYS (the
// first key signs; the test rotates keys by restarting it with a new
// first key), and issues access tokens by the client credentials grant
// with RFC 8707 resource indicators: any resource the client names is
// the audience of its token, in $FORMAT ("jwt", RFC 9068, or "opaque",
// checked by RFC 7662 introspection at /token/introspection).
//
// Clients: "app" (secret "app-secret") and "bob" (secret "bob-secret")
// ask for tokens, as two principals of one team; "gateway" (secret
// "gateway-secret") introspects them.
import { readFileSync } from 'node:fs';
import Provider from 'oidc-provider';

const port = Number(process.env.PORT);
const keys = JSON.parse(readFileSync(process.env.KEYS, 'utf8'));
const format = process.env.FORMAT || 'jwt';
const issuer = `http://127.0.0.1:${port}`;

const alg = keys.keys[0].alg;
const client = { redirect_uris: [], response_types: [], id_token_signed_response_alg: alg };
const provider = new Provider(issuer, {
  clients: [
    { ...client, client_id: 'app', client_secret: 'app-secret', grant_types: ['client_credentials'] },
    { ...client, client_id: 'bob', client_secret: 'bob-secret', grant_types: ['client_credentials'] },
    { ...client, client_id: 'gateway', client_secret: 'gateway-secret', grant_types: [] },
  ],
  jwks: keys,
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    introspection: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => undefined,
      useGrantedResource: () => true,
      getResourceServerInfo: (_ctx, resourceIndicator) => ({
        scope: 'mcp:tools mcp:admin',
        audience: resourceIndicator,
        accessTokenTTL: 3600,
        accessTokenFormat: format,
        jwt: { sign: { alg } },
      }),
    },
  },
});
provider.proxy = false;
provider.on('server_error', (_ctx, err) => console.error('server_error', err));

const server = provider.listen(port, '127.0.0.1', () => console.log(`ready ${issuer}`));
const stop = () => server.close(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('SIGINT', stop);

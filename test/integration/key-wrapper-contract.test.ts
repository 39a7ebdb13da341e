import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LocalMasterKey } from "../../lambda/adapters/fs/master-key";
import { createKmsClient, KmsKeyWrapper } from "../../lambda/adapters/kms/key-wrapper";
import { startKmsStandIn } from "../infra/metering-stand-ins";
import { keyWrapperContract } from "../support/key-wrapper-contract";

// The local host's master key file.
keyWrapperContract("LocalMasterKey", async () => {
  const dir = mkdtempSync(join(tmpdir(), "dmt-contract-"));
  return {
    wrapper: new LocalMasterKey(join(dir, "a", "master.key")),
    other: new LocalMasterKey(join(dir, "b", "master.key")),
    async close() {
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

// KmsKeyWrapper over KMS's JSON protocol, served by the KMS stand-in (real AES-GCM bound to the key id
// and the encryption context, refusing as KMS does); another key is another key id.
keyWrapperContract("KmsKeyWrapper over the KMS stand-in", async () => {
  const kms = await startKmsStandIn();
  const client = createKmsClient({ endpoint: kms.url, region: "us-east-1" });
  const arn = "arn:aws:kms:us-east-1:123456789012:key/contract";
  return {
    wrapper: new KmsKeyWrapper(client, arn),
    other: new KmsKeyWrapper(client, `${arn}-other`),
    close: () => kms.close(),
  };
});

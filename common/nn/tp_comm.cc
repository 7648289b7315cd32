// TpComm::none(): the identity TpComm every non-tensor-parallel run uses (see tp_comm.h).
#include "common/nn/tp_comm.h"

namespace llmp {

TpComm& TpComm::none() {
  static TpComm identity;  // stateless: one instance serves every model
  return identity;
}

}  // namespace llmp

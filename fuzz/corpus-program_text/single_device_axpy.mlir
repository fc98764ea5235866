// A single-device program: y = a * x + b.
module @single_device_axpy attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%a: tensor<f32>, %x: tensor<6xf32>, %b: tensor<6xf32>) -> tensor<6xf32> {
    %ab = stablehlo.broadcast_in_dim %a, dims = [] : (tensor<f32>) -> tensor<6xf32>
    %ax = stablehlo.multiply %ab, %x : tensor<6xf32>
    %y = stablehlo.add %ax, %b : tensor<6xf32>
    return %y : tensor<6xf32>
  }
}
